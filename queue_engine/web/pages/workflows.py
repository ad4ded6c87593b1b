"""The dashboard's workflow pages: the list, and one workflow's DAG by level.

Both read through :class:`~queue_engine.client.Client` (``list_workflows``,
``get_workflow``, ``workflow_nodes``), the calls ``queue-ctl workflows`` and
``/api/v1/workflows`` make. The DAG is laid out by
:mod:`queue_engine.workflows.layout`, the layout ``queue-ctl workflows show``
draws as text: one box per node or per folded fan-out, in rows by depth
level, so a 10,000-node fan-out is one box with its counts, and the page's
size follows the number of groups, not of nodes. The buttons (cancel, retry,
provide input) are in :mod:`.actions`, drawn for operators only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from queue_engine.client import Client
from queue_engine.errors import ValidationError, WorkflowNotFound
from queue_engine.web.pages.context import Page, PageContext
from queue_engine.workflows import INPUT_TASK, NodeInfo, WorkflowState, layout
from queue_engine.workflows.model import COUNT_NAMES

router = APIRouter(include_in_schema=False)

#: Workflows on one page of the list.
PAGE_SIZE = 50
#: At most this many awaiting input nodes get a form on the page (the rest: ``queue-ctl``).
MAX_INPUT_FORMS = 20
STATES = tuple(s.value for s in WorkflowState)


def badge(state: str) -> str:
    """The CSS class of a state's badge (``awaiting input`` → ``awaiting-input``)."""
    return state.replace(" ", "-")


def ordered_counts(counts: Counter[str] | dict[str, int]) -> list[tuple[str, int]]:
    """The non-zero counts in the order ``queue-ctl`` prints them (the page formats the numbers)."""
    order = [s for s in layout.STATE_ORDER if counts.get(s)]
    order += sorted(s for s in counts if s not in layout.STATE_ORDER and counts[s])
    return [(s, counts[s]) for s in order]


@dataclass(frozen=True, slots=True)
class Link:
    """A node's name and its job's id, for a link to the job page."""

    node: str
    job_id: int


@dataclass(slots=True)
class Box:
    """One box of the drawing: a node, or a folded group of siblings."""

    label: str
    state: str
    count: int
    task: str
    job_id: int
    last: Link | None
    states: list[tuple[str, int]]
    attempt: str
    duration: float | None
    after: str
    error: str | None
    bad: list[Link] = field(default_factory=list)
    bad_more: int = 0

    @property
    def badge(self) -> str:
        """The CSS class of its state."""
        return badge(self.state)


@dataclass(frozen=True, slots=True)
class Level:
    """One depth level: its boxes, left to right."""

    number: int
    boxes: list[Box]


def _single(group: layout.Group, group_of: dict[str, layout.Group], now: datetime) -> Box:
    node = group.nodes[0]
    state = layout.node_state(node)
    is_input = node.task == INPUT_TASK
    return Box(
        label=group.label,
        state=state,
        count=1,
        task="input" if is_input else node.task,
        job_id=node.job_id,
        last=None,
        states=[],
        attempt="" if is_input else f"{node.attempt}/{node.max_attempts}",
        duration=None if is_input else layout.node_duration(node, now),
        after=layout.after_text(node, group_of),
        error=(
            layout.error_line(node.error)
            if node.error and state in layout.BAD_STATES | {"skipped"}
            else None
        ),
    )


def _folded(group: layout.Group, group_of: dict[str, layout.Group], now: datetime) -> Box:
    states = Counter(layout.node_state(n) for n in group.nodes)
    worst = next((s for s in ("failed", "lost", "canceled") if states.get(s)), None)
    main = worst or (next(iter(states)) if len(states) == 1 else "mixed")
    bad = [n for n in group.nodes if layout.node_state(n) in layout.BAD_STATES]
    durations = [d for n in group.nodes if (d := layout.node_duration(n, now)) is not None]
    attempts = {n.attempt for n in group.nodes}
    first, last = group.nodes[0], group.nodes[-1]
    return Box(
        label=group.label,
        state=main,
        count=len(group.nodes),
        task=first.task,
        job_id=first.job_id,
        last=Link(last.node, last.job_id),
        states=ordered_counts(states),
        attempt=f"{min(attempts)}-{max(attempts)}" if len(attempts) > 1 else str(min(attempts)),
        duration=max(durations) if durations else None,
        after=(
            layout.after_text(first, group_of)
            if group.shared
            else layout.parallel_after_text(group, group_of)
        ),
        error=None,
        bad=[Link(n.node, n.job_id) for n in bad[: layout.MAX_NAMES]],
        bad_more=max(len(bad) - layout.MAX_NAMES, 0),
    )


def dag_levels(nodes: list[NodeInfo], now: datetime) -> list[Level]:
    """The boxes of the drawing by level: one per node or folded sibling group."""
    groups = layout.group_nodes(nodes)
    group_of = {n.node: g for g in groups for n in g.nodes}
    out: list[Level] = []
    for group in groups:
        box = _folded(group, group_of, now) if group.collapsed else _single(group, group_of, now)
        if not out or out[-1].number != group.level:
            out.append(Level(group.level, []))
        out[-1].boxes.append(box)
    return out


def awaiting_input(nodes: list[NodeInfo]) -> list[Link]:
    """The input nodes ready for a value (the first :data:`MAX_INPUT_FORMS`)."""
    ready = [Link(n.node, n.job_id) for n in nodes if layout.node_state(n) == "awaiting input"]
    return ready[:MAX_INPUT_FORMS]


def _client(ctx: PageContext, conn: Any) -> Client:
    return Client(conn=conn, schema=ctx.schema)


@router.get("/workflows", response_class=HTMLResponse)
def workflows(request: Request, ctx: Page) -> HTMLResponse:
    """Workflows newest first with their state and counts; keyset pages (``before``)."""
    q = request.query_params
    state = (q.get("state") or "").strip() or None
    name = (q.get("name") or "").strip() or None
    before_raw = (q.get("before") or "").strip()
    error = None
    rows: list[Any] = []
    before = int(before_raw) if before_raw.isdigit() and int(before_raw) > 0 else None
    if before_raw and before is None:
        error = f"before: not a workflow id: {before_raw[:40]!r}"
    else:
        try:
            with ctx.connection() as conn:
                rows = list(
                    _client(ctx, conn).list_workflows(
                        state=state, name=name, before_id=before, limit=PAGE_SIZE + 1
                    )
                )
        except ValidationError as exc:
            error = str(exc)
    page, more = rows[:PAGE_SIZE], len(rows) > PAGE_SIZE
    query = urlencode([(k, v) for k, v in (("state", state), ("name", name)) if v])
    return HTMLResponse(
        ctx.render(
            "workflows.html",
            nav="workflows",
            title="Workflows",
            workflows=page,
            next_before=page[-1].id if more else None,
            states=STATES,
            state=state,
            name=name,
            paged=before is not None,
            filter_query=query,
            filter_error=error,
            count_names=COUNT_NAMES,
        )
    )


#: The answer of a live fragment once its workflow has ended: htmx swaps it in
#: and stops polling (a 2xx code htmx reserves for that).
STOP_POLLING = 286


def _workflow_values(
    ctx: PageContext, workflow_id: int, *, with_nodes: bool = True
) -> dict[str, Any] | None:
    """What the page and its fragments draw; None for an unknown workflow."""
    try:
        with ctx.connection() as conn:
            client = _client(ctx, conn)
            info = client.get_workflow(workflow_id)
            nodes = list(client.workflow_nodes(workflow_id)) if with_nodes else []
    except (WorkflowNotFound, ValidationError):
        return None
    took = (info.finished_at - info.created_at).total_seconds() if info.finished_at else None
    return {
        "wf": info,
        "counts": ordered_counts(info.counts),
        "levels": dag_levels(nodes, ctx.now()),
        "inputs": awaiting_input(nodes) if ctx.can_operate else [],
        "took": took,
    }


def _not_found(ctx: PageContext, workflow_id: int) -> HTMLResponse:
    body = ctx.render(
        "not_found.html",
        nav="workflows",
        title=f"Workflow {workflow_id} not found",
        detail="No workflow has this id: it was never started, or retention pruned it.",
        back=f"{ctx.prefix}/workflows",
    )
    return HTMLResponse(body, status_code=404)


@router.get("/workflows/{workflow_id}", response_class=HTMLResponse)
def workflow(workflow_id: int, ctx: Page) -> HTMLResponse:
    """One workflow: its state and counts, its DAG by level, and the operator's controls."""
    values = _workflow_values(ctx, workflow_id)
    if values is None:
        return _not_found(ctx, workflow_id)
    return HTMLResponse(
        ctx.render("workflow.html", nav="workflows", title=f"Workflow {workflow_id}", **values)
    )


def _fragment(
    ctx: PageContext, workflow_id: int, template: str, *, with_nodes: bool
) -> HTMLResponse:
    values = _workflow_values(ctx, workflow_id, with_nodes=with_nodes)
    if values is None:
        return _not_found(ctx, workflow_id)
    ended = values["wf"].state != WorkflowState.RUNNING
    return HTMLResponse(ctx.render(template, **values), status_code=STOP_POLLING if ended else 200)


@router.get("/fragments/workflows/{workflow_id}/facts", response_class=HTMLResponse)
def workflow_facts(workflow_id: int, ctx: Page) -> HTMLResponse:
    """A running workflow's state and counts (its row only), polled by its page."""
    return _fragment(ctx, workflow_id, "_workflow_facts.html", with_nodes=False)


@router.get("/fragments/workflows/{workflow_id}/dag", response_class=HTMLResponse)
def workflow_dag(workflow_id: int, ctx: Page) -> HTMLResponse:
    """A running workflow's DAG, polled by its page (286 once it ended: polling stops)."""
    return _fragment(ctx, workflow_id, "_workflow_dag.html", with_nodes=True)
