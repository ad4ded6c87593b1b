"""The dashboard's workflow pages: the list, and one workflow's DAG as a graph and by level.

Both read through :class:`~queue_engine.producer.client.Client` (``list_workflows``,
``get_workflow``, ``workflow_nodes``), the calls ``queue-ctl workflows`` and
``/api/v1/workflows`` make. The nodes are grouped by
:mod:`queue_engine.operator.workflow_layout`, the grouping ``queue-ctl workflows show``
draws as text: one box per node or per folded fan-out, so a 10,000-node
fan-out is one box with its counts. The page draws the boxes twice from the
same list: as an SVG graph laid out by :mod:`.graph` (columns by level,
edges), and as text by level (parents and errors, for reading and for screen
readers). Past :data:`.graph.MAX_BOXES` groups the boxes are folded coarser
and cut, so the page's size is bounded whatever the workflow's. The buttons
(cancel, retry, provide input) are in :mod:`.actions`, drawn for operators only.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from queue_engine.foundation.errors import ValidationError, WorkflowNotFound
from queue_engine.operator import workflow_layout as layout
from queue_engine.producer.client import Client
from queue_engine.producer.workflows import INPUT_TASK, NodeInfo, WorkflowState
from queue_engine.producer.workflows.model import COUNT_NAMES
from queue_engine.web.pages import graph
from queue_engine.web.pages.context import Page, PageContext
from queue_engine.web.pages.render import badge, dur, num

router = APIRouter(include_in_schema=False)

#: Workflows on one page of the list.
PAGE_SIZE = 50
#: At most this many awaiting input nodes get a form on the page (the rest: ``queue-ctl``).
MAX_INPUT_FORMS = 20
STATES = tuple(s.value for s in WorkflowState)


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


def _box(group: layout.Group, group_of: dict[str, layout.Group], now: datetime) -> Box:
    return _folded(group, group_of, now) if group.collapsed else _single(group, group_of, now)


def dag_boxes(groups: list[layout.Group], now: datetime) -> list[Box]:
    """One box per group (a node, or folded siblings): what both views draw."""
    group_of = {n.node: g for g in groups for n in g.nodes}
    return [_box(group, group_of, now) for group in groups]


def dag_levels(groups: list[layout.Group], boxes: list[Box]) -> list[Level]:
    """The boxes of the text view by level."""
    out: list[Level] = []
    for group, box in zip(groups, boxes, strict=True):
        if not out or out[-1].number != group.level:
            out.append(Level(group.level, []))
        out[-1].boxes.append(box)
    return out


#: The graph's boxes and gaps (px). Five levels fit the page at 1366 px.
BOX_WIDTH = 196.0
GAP_X = 52.0
GAP_Y = 14.0
SINGLE_HEIGHT = 46.0
FOLDED_HEIGHT = 66.0
LINE_HEIGHT = 15.0
#: The page's room for the graph at 1366 px; a wider graph is scaled down to fit
#: when that keeps it at :data:`MIN_SCALE` or more, else it scrolls sideways.
FIT_WIDTH = 1236.0
MIN_SCALE = 0.7
#: Characters that fit a box's line (12 px monospace names, 11.5 px text).
NAME_CHARS = 23
TEXT_CHARS = 27
#: The sign before a folded box's count (a multiplication sign: "x300" in print).
TIMES = "\N{MULTIPLICATION SIGN}"


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + layout.ELLIPSIS


@dataclass(frozen=True, slots=True)
class Drawn:
    """One box of the graph: what it shows, where, and where a click goes."""

    box: Box
    x: float
    y: float
    height: float
    href: str
    lines: list[str]
    title: str
    #: The folded box's bar: (state, x offset, width) of each state's share.
    segments: list[tuple[str, float, float]]


@dataclass(frozen=True, slots=True)
class GraphView:
    """The SVG drawing of a workflow's DAG (see :mod:`.graph`)."""

    boxes: list[Drawn]
    routes: list[graph.Route]
    width: float
    height: float
    fit: bool
    folded: graph.Folded
    box_width: float = BOX_WIDTH


def _drawn(box: Box, group: layout.Group, workflow_id: int, x: float, y: float) -> Drawn:
    folded = box.count > 1
    if folded:
        counts = ", ".join(f"{num(n)} {s}" for s, n in box.states)
        lines = [
            _fit(box.label, NAME_CHARS),
            _fit(f"{TIMES}{num(box.count)} · {box.task}", TEXT_CHARS),
            _fit(counts, TEXT_CHARS),
        ]
        last = max(n.job_id for n in group.nodes)
        query = [("workflow", workflow_id), ("task", box.task), ("before", last + 1)]
        href = "/jobs?" + urlencode(query)
        room = BOX_WIDTH - 24
        segments, offset = [], 0.0
        for state, n in box.states:
            width = room * n / box.count
            segments.append((badge(state), offset, width))
            offset += width
        title = f"{box.label}: {num(box.count)} nodes of {box.task} ({counts}); click for the list"
    else:
        detail = [box.task, box.state]
        if box.duration is not None:
            detail.append(dur(box.duration))
        lines = [_fit(box.label, NAME_CHARS), _fit(" · ".join(detail), TEXT_CHARS)]
        if box.error:
            lines.append(_fit(_unqualified(box.error), TEXT_CHARS))
        href = f"/jobs/{box.job_id}"
        segments = []
        title = f"{box.label}: {box.task}, {box.state}"
        if box.attempt:
            title += f", attempt {box.attempt}"
        if box.error:
            title += f"\n{box.error}"
    if box.after:
        title += f"\nafter {box.after}"
    return Drawn(box, x, y, _height(box), href, lines, title, segments)


def _unqualified(error: str) -> str:
    """``queue_engine.producer.retry.Permanent: ...`` as ``Permanent: ...``: a box has room for little."""
    return re.sub(r"^(?:[A-Za-z_]\w*\.)+(?=\w+(?::|$))", "", error)


def _height(box: Box) -> float:
    """A folded box has a line of counts and a bar; a failed node a line of its error."""
    if box.count > 1:
        return FOLDED_HEIGHT
    return SINGLE_HEIGHT + (LINE_HEIGHT if box.error else 0.0)


def dag_graph(folded: graph.Folded, boxes: list[Box], workflow_id: int) -> GraphView:
    """The graph of the folded groups: boxes placed in columns, edges routed between them."""
    groups = folded.groups
    drawing = graph.place(
        [g.level for g in groups],
        [_height(box) for box in boxes],
        folded.links,
        box_width=BOX_WIDTH,
        gap_x=GAP_X,
        gap_y=GAP_Y,
    )
    drawn = [
        _drawn(box, group, workflow_id, x, y)
        for box, group, x, y in zip(boxes, groups, drawing.x, drawing.y, strict=True)
    ]
    fit = FIT_WIDTH < drawing.width <= FIT_WIDTH / MIN_SCALE
    return GraphView(drawn, drawing.routes, drawing.width, drawing.height, fit, folded)


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
    folded = graph.fold(layout.group_nodes(nodes))
    boxes = dag_boxes(folded.groups, ctx.now())
    return {
        "wf": info,
        "counts": ordered_counts(info.counts),
        "levels": dag_levels(folded.groups, boxes),
        "graph": dag_graph(folded, boxes, workflow_id),
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
