"""The workflow operations, independent of sync or async I/O.

As :mod:`queue_engine.producer.operations` is for single jobs: what each call sends and
how its answer is read, written once for :class:`~queue_engine.producer.client.Client`
and :class:`~queue_engine.producer.async_client.AsyncClient`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from queue_engine.foundation import sql as queries
from queue_engine.foundation.errors import (
    InvalidTransition,
    QueueEngineError,
    ValidationError,
    WorkflowNotFound,
)
from queue_engine.producer.operations import Statement
from queue_engine.producer.validation import check_id
from queue_engine.producer.workflows.model import WorkflowState
from queue_engine.producer.workflows.providers import providers
from queue_engine.producer.workflows.spec import NAME_PATTERN, NODE_PATTERN, Workflow

LIST_LIMIT_MAX = 1_000
#: How big a provided input value may be (as JSON), like a job's args.
MAX_INPUT_BYTES = 1024 * 1024


def check_workflow_id(workflow_id: Any) -> int:
    """A workflow id is a bigint from 1; anything else is refused before a round trip."""
    return check_id("workflow", workflow_id)


def start_statement(
    schema: str,
    workflow: Workflow | str,
    params: Mapping[str, Any] | None = None,
    *,
    schedule: str | None = None,
) -> Statement:
    """The one call that inserts the whole workflow (validated, parents first).

    ``workflow`` is a :class:`Workflow`, or the name of a provider this
    process imported (:mod:`.providers`), built here from ``params``.
    """
    if isinstance(workflow, str):
        workflow = providers.build(workflow, params)
    elif params is not None:
        raise ValidationError("start_workflow takes params only with a workflow provider's name")
    if not isinstance(workflow, Workflow):
        raise ValidationError(
            f"start_workflow takes a Workflow or a provider's name, got {type(workflow).__name__}"
        )
    return Statement(
        queries.query("start_workflow", schema),
        {
            "name": workflow.name,
            "nodes": workflow.payload(),
            "idempotency_key": workflow.idempotency_key,
            "producer": workflow.producer,
            "schedule": schedule,
        },
    )


def get_statement(schema: str, workflow_id: int) -> Statement:
    """One workflow and its counts."""
    return Statement(queries.query("get_workflow", schema), {"id": check_workflow_id(workflow_id)})


def list_statement(
    schema: str,
    *,
    state: str | None = None,
    name: str | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> Statement:
    """Workflows newest first, filtered; ``before_id`` pages back (keyset)."""
    if state is not None and state not in {s.value for s in WorkflowState}:
        raise ValidationError(
            f"state must be one of {', '.join(s.value for s in WorkflowState)}, got {state!r}"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValidationError(f"limit must be an integer from 1 to {LIST_LIMIT_MAX}, got {limit!r}")
    if before_id is not None:
        check_workflow_id(before_id)
    if name is not None and (not isinstance(name, str) or not NAME_PATTERN.fullmatch(name)):
        raise ValidationError(f"name must be a workflow name, got {name!r}")
    return Statement(
        queries.query("list_workflows", schema),
        {"state": state, "name": name, "limit": limit, "before_id": before_id},
    )


def nodes_statement(schema: str, workflow_id: int) -> Statement:
    """Every node of one workflow, parents first."""
    return Statement(
        queries.query("workflow_nodes", schema), {"id": check_workflow_id(workflow_id)}
    )


def cancel_statement(schema: str, workflow_id: int, message: str) -> Statement:
    """Cancel every unfinished node; running ones cooperatively."""
    return Statement(
        queries.query("cancel_workflow", schema),
        {
            "id": check_workflow_id(workflow_id),
            "message": message,
            "cancel_channel": queries.cancel_channel(schema),
        },
    )


def retry_statement(schema: str, workflow_id: int, message: str) -> Statement:
    """Re-run the failed, canceled and lost nodes and their unsucceeded descendants."""
    return Statement(
        queries.query("retry_workflow", schema),
        {
            "id": check_workflow_id(workflow_id),
            "message": message,
            "jobs_channel": queries.jobs_channel(schema),
        },
    )


def provide_input_statement(schema: str, workflow_id: int, node: str, value: Any) -> Statement:
    """Give an input node its value (any JSON value)."""
    if not isinstance(node, str) or not NODE_PATTERN.fullmatch(node):
        raise ValidationError(f"node must be a node name, got {node!r}")
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"input value must be JSON-serialisable: {exc}") from None
    if "\\u0000" in encoded:
        raise ValidationError("input value must not contain NUL characters")
    if len(encoded.encode()) > MAX_INPUT_BYTES:
        raise ValidationError(f"input value is larger than {MAX_INPUT_BYTES} bytes as JSON")
    return Statement(
        queries.query("provide_input", schema),
        {"id": check_workflow_id(workflow_id), "node": node, "value": encoded},
    )


def cancel_outcome(workflow_id: int, row: dict[str, Any] | None) -> tuple[int, int]:
    """Read ``cancel_workflow``'s answer: (canceled now, asked to stop); else raise."""
    if row is None:
        raise WorkflowNotFound(workflow_id)
    if row["canceled"] < 0:
        raise InvalidTransition(f"cannot cancel workflow {workflow_id}: it has already ended")
    return int(row["canceled"]), int(row["stopping"])


def retry_outcome(workflow_id: int, row: dict[str, Any] | None) -> int:
    """Read ``retry_workflow``'s answer: how many nodes run again; else raise."""
    if row is None or row["rerun"] is None:
        raise WorkflowNotFound(workflow_id)
    if row["rerun"] < 0:
        raise InvalidTransition(
            f"cannot retry workflow {workflow_id}: it is still running "
            "(cancel it first, or wait for it to end)"
        )
    return int(row["rerun"])


#: provide_input's answers that are not errors: True when it was provided now.
INPUT_ACCEPTED = {"provided": True, "already": False}


def input_outcome(workflow_id: int, node: str, outcome: str | None) -> bool:
    """Read ``provide_input``'s one-word answer: True provided now, False already; else raise."""
    if outcome in INPUT_ACCEPTED:
        return INPUT_ACCEPTED[outcome]
    if outcome == "not_found" or outcome is None:
        raise WorkflowNotFound(workflow_id, node)
    if outcome == "not_input":
        raise InvalidTransition(f"node {node} of workflow {workflow_id} is not an input node")
    if outcome == "not_ready":
        raise InvalidTransition(
            f"input node {node} of workflow {workflow_id} is not awaiting input yet: "
            "its parents have not all ended"
        )
    raise QueueEngineError(f"provide_input answered {outcome!r}")
