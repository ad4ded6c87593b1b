"""``/api/v1/workflows``: start, read, list, cancel, retry workflows and provide input.

Every route runs the engine's own workflow operations
(:class:`~queue_engine.producer.client.Client`'s ``start_workflow``, ``get_workflow``,
``list_workflows``, ``workflow_nodes``, ``cancel_workflow``,
``retry_workflow``, ``provide_input``) on a connection borrowed for the
caller's scope, so the API, ``queue-ctl workflows`` and Python cannot
disagree.

A start body is turned into a :class:`~queue_engine.producer.workflows.Workflow` and
checked whole (names, edges, cycles, every node's options) before a
connection is even borrowed: a bad shape is a 422 naming the node, and
nothing is written. Idempotency: the ``Idempotency-Key`` header (or the
body's ``idempotency_key``) is the workflow's key; a first request creates it
(201), a re-send returns the workflow that holds the key (200).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.workflows import After, Workflow, WorkflowState
from queue_engine.producer.workflows.operations import LIST_LIMIT_MAX
from queue_engine.web.api.deps import API_PREFIX, ApiRoute, client, errors
from queue_engine.web.api.fields import ID_MAX, ID_MIN, Key, WorkflowName
from queue_engine.web.api.models import (
    InputIn,
    InputProvided,
    WorkflowCanceled,
    WorkflowCreate,
    WorkflowEdgeIn,
    WorkflowNodeOut,
    WorkflowNodes,
    WorkflowOut,
    WorkflowPage,
    WorkflowRetried,
)
from queue_engine.web.auth import Principal, require_operator, require_producer, require_read

router = APIRouter(prefix=f"{API_PREFIX}/workflows", tags=["workflows"], route_class=ApiRoute)

WorkflowId = Annotated[int, Path(ge=ID_MIN, le=ID_MAX, description="the workflow's id")]
IdempotencyKey = Annotated[
    Key | None,
    Header(alias="Idempotency-Key", description="the workflow's idempotency key (a safe re-send)"),
]
Read = Annotated[Principal, Depends(require_read)]
Producer = Annotated[Principal, Depends(require_producer)]
Operator = Annotated[Principal, Depends(require_operator)]

#: Options an input node takes besides ``after`` (everything else is a job's).
INPUT_OPTIONS = frozenset({"timeout_s", "queue"})

START_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "an idempotent re-send: the workflow that already holds the key"},
    422: {"description": "a bad shape or option (naming the node); nothing was written"},
}


class IdempotencyKeyReused(ValidationError):
    """The idempotency key is held by a workflow of another name (422, nothing written)."""


def build_workflow(body: WorkflowCreate, key: str | None) -> Workflow:
    """The :class:`Workflow` of a start body, checked whole; a :class:`ValidationError` naming the node."""
    if key is not None and body.idempotency_key not in (None, key):
        raise ValidationError(
            "idempotency_key: the Idempotency-Key header and the body's idempotency_key differ"
        )
    wf = Workflow(body.name, idempotency_key=key or body.idempotency_key, producer=body.producer)
    for node in body.nodes:
        after = [
            After(e.node, e.requires) if isinstance(e, WorkflowEdgeIn) else e for e in node.after
        ]
        options = node.options()
        if node.input:
            extra = sorted(set(options) - INPUT_OPTIONS) + (["task"] if node.task else [])
            if extra:
                raise ValidationError(
                    f"workflow {body.name}, node {node.node}: an input node takes only after, "
                    f"timeout_s and queue, not {', '.join(extra)}"
                )
            wf.input(node.node, after=after, **options)
        elif node.task is None:
            raise ValidationError(
                f"workflow {body.name}, node {node.node}: 'task' is required "
                "(or 'input': true for an input node)"
            )
        else:
            wf.add(node.node, node.task, after=after, **options)
    wf.ordered()  # unknown parents and cycles, before a connection is borrowed
    return wf


@router.post("", status_code=201, response_model=WorkflowOut, responses=START_RESPONSES)
def start_workflow(
    body: WorkflowCreate,
    request: Request,
    response: Response,
    principal: Producer,
    idempotency_key: IdempotencyKey = None,
) -> WorkflowOut:
    """Start a workflow: every node and edge in one call (201), or the one holding its key (200)."""
    wf = build_workflow(body, idempotency_key)
    with client(request, principal) as c:
        info = c.start_workflow(wf)
    if not info.created and info.name != wf.name:
        raise IdempotencyKeyReused(
            f"idempotency key already used by workflow {info.id} ({info.name}): "
            "use a new key for different work"
        )
    response.status_code = 201 if info.created else 200
    response.headers["Location"] = f"{API_PREFIX}/workflows/{info.id}"
    return WorkflowOut.of(info)


@router.get("", response_model=WorkflowPage)
def list_workflows(
    request: Request,
    principal: Read,
    state: Annotated[
        WorkflowState | None, Query(description="only workflows in this state")
    ] = None,
    name: Annotated[WorkflowName | None, Query(description="only workflows of this name")] = None,
    before_id: Annotated[
        int | None, Query(ge=ID_MIN, le=ID_MAX, description="the last id of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=LIST_LIMIT_MAX)] = 50,
) -> WorkflowPage:
    """Workflows newest first, with their counts; keyset pages (``before_id``), never an offset."""
    # One row more than asked says whether a next page exists; at the engine's
    # cap a full page offers one (which may turn out empty).
    ask = min(limit + 1, LIST_LIMIT_MAX)
    with client(request, principal) as c:
        rows = c.list_workflows(
            state=str(state) if state else None, name=name, before_id=before_id, limit=ask
        )
    items = [WorkflowOut.of(w) for w in rows[:limit]]
    more = len(rows) > limit or (ask == limit and len(rows) == limit)
    return WorkflowPage(items=items, next_before_id=items[-1].id if more and items else None)


@router.get("/{workflow_id}", response_model=WorkflowOut, responses=errors(404))
def get_workflow(workflow_id: WorkflowId, request: Request, principal: Read) -> WorkflowOut:
    """One workflow: its state and per-state node counts."""
    with client(request, principal) as c:
        return WorkflowOut.of(c.get_workflow(workflow_id))


@router.get("/{workflow_id}/nodes", response_model=WorkflowNodes, responses=errors(404))
def workflow_nodes(workflow_id: WorkflowId, request: Request, principal: Read) -> WorkflowNodes:
    """Every node of the workflow (its job's id, status, attempt, times, edges), parents first."""
    with client(request, principal) as c:
        nodes = c.workflow_nodes(workflow_id)
    return WorkflowNodes(workflow_id=workflow_id, items=[WorkflowNodeOut.of(n) for n in nodes])


@router.post(
    "/{workflow_id}/cancel",
    response_model=WorkflowCanceled,
    responses=errors(404, 409, s409="the workflow already ended"),
)
def cancel_workflow(
    workflow_id: WorkflowId, request: Request, principal: Operator
) -> WorkflowCanceled:
    """Cancel every unfinished node, running ones cooperatively (409 when it already ended)."""
    with client(request, principal) as c:
        canceled, stopping = c.cancel_workflow(
            workflow_id, message=f"workflow canceled over HTTP by {principal.name}"
        )
    return WorkflowCanceled(workflow_id=workflow_id, canceled=canceled, stopping=stopping)


@router.post(
    "/{workflow_id}/retry",
    response_model=WorkflowRetried,
    responses=errors(404, 409, s409="the workflow is still running"),
)
def retry_workflow(
    workflow_id: WorkflowId, request: Request, principal: Operator
) -> WorkflowRetried:
    """Re-run the failed, canceled and lost nodes and their descendants (409 while running)."""
    with client(request, principal) as c:
        rerun = c.retry_workflow(
            workflow_id, message=f"workflow retried over HTTP by {principal.name}"
        )
    return WorkflowRetried(workflow_id=workflow_id, rerun=rerun)


@router.post(
    "/{workflow_id}/provide-input",
    response_model=InputProvided,
    responses=errors(404, 409, s409="the node is not an input node, or not waiting yet"),
)
def provide_input(
    workflow_id: WorkflowId, body: InputIn, request: Request, principal: Operator
) -> InputProvided:
    """Give an input node its value; a re-send answers ``already: true`` (409: not ready)."""
    with client(request, principal) as c:
        provided = c.provide_input(workflow_id, body.node, body.value)
    return InputProvided(
        workflow_id=workflow_id, node=body.node, provided=provided, already=not provided
    )
