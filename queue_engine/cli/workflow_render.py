"""How ``queue-ctl workflows`` draws workflows: pure functions from records to lines.

A workflow may have 100,000 nodes, so the drawing must stay readable whatever
its size. Nodes are laid out **by depth level** (a node's level is one more
than its deepest parent's), one line each, with its state, attempt, duration
and the parents it comes ``after``. Siblings that differ only by name (same
level, same task, same parents with the same requirements: a fan-out) are
**collapsed** into one line, ``parse-0 … parse-9999 (10000 nodes: 9990
succeeded, 10 failed)``, and a child after all of them names the group by
that same label rather than 10,000 names; parallel branches (each ``load-i``
after its own ``parse-i``) collapse likewise, ``after: parse-0 … parse-9999
(one each)``. So a 10,000-node fan-out into one fan-in draws in four lines,
and a chain draws one line per link.

Nothing here reads the database or the terminal: the command passes the
records, the current time and whether to colour, and tests call these
functions directly (tests/unit/test_workflow_render.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import click

from queue_engine.cli.render import table
from queue_engine.stats import format_duration
from queue_engine.workflows.model import COUNT_NAMES, NodeInfo, WorkflowInfo
from queue_engine.workflows.spec import INPUT_TASK

#: Siblings are collapsed into one line from this many on (fewer read better one by one).
COLLAPSE_AT = 4
#: At most this many names in one ``after:`` or ``failed, lost or canceled:`` list.
MAX_NAMES = 6
#: Terminal colour of each state (click.style's names); states not listed stay plain.
STATE_COLOURS = {
    "succeeded": "green",
    "failed": "red",
    "lost": "red",
    "canceled": "yellow",
    "skipped": "cyan",
    "running": "blue",
    "awaiting input": "magenta",
}
#: The order states are counted in, in a collapsed line and the header
#: (``unfinished`` is the workflow row's count of nodes not yet ended).
STATE_ORDER = (
    "succeeded",
    "unfinished",
    "running",
    "queued",
    "waiting",
    "awaiting input",
    "failed",
    "lost",
    "canceled",
    "skipped",
)
BAD_STATES = frozenset({"failed", "lost", "canceled"})
ELLIPSIS = "…"


def paint(text: str, state: str, color: bool) -> str:
    """``text`` in the colour of ``state`` when ``color`` is on (else unchanged)."""
    colour = STATE_COLOURS.get(state)
    if not color or colour is None:
        return text
    return click.style(text, fg=colour, bold=state in BAD_STATES)


def node_state(node: NodeInfo) -> str:
    """The state shown for a node: its job status, or ``awaiting input`` for a ready input node."""
    if node.task == INPUT_TASK and node.status == "waiting" and not node.pending_parents:
        return "awaiting input"
    return node.status


def node_duration(node: NodeInfo, now: datetime) -> float | None:
    """Seconds the node ran: its recorded duration, or so far for a running node."""
    if node.duration_ms is not None:
        return node.duration_ms / 1000
    if node.started_at is not None:
        end = node.finished_at or now
        return max((end - node.started_at).total_seconds(), 0.0)
    return None


def counts_text(counts: Counter[str] | dict[str, int]) -> str:
    """``9990 succeeded, 10 failed`` in :data:`STATE_ORDER`, zero counts left out."""
    order = [s for s in STATE_ORDER if counts.get(s)] + sorted(
        s for s in counts if s not in STATE_ORDER and counts[s]
    )
    return ", ".join(f"{counts[s]} {s}" for s in order) or "none"


def age(then: datetime, now: datetime) -> str:
    """How long ago, short (``12.3s``, ``4m05s``, ``3d4h``)."""
    return format_duration((now - then).total_seconds())


# -- list -----------------------------------------------------------------------------


LIST_HEADER = [
    "ID",
    "NAME",
    "STATE",
    "NODES",
    "OPEN",
    "OK",
    "FAILED",
    "CANCELED",
    "LOST",
    "SKIPPED",
    "AGE",
]


def list_lines(workflows: Sequence[WorkflowInfo], now: datetime, *, color: bool) -> list[str]:
    """The ``workflows list`` table: one workflow a line, its counts in columns."""
    rows = []
    for w in workflows:
        c = w.counts
        rows.append(
            [
                str(w.id),
                w.name,
                str(w.state),
                str(w.node_count),
                *(str(c.get(name, 0)) for name in COUNT_NAMES),
                age(w.created_at, now),
            ]
        )
    lines = table(LIST_HEADER, rows, right={0, 3, 4, 5, 6, 7, 8, 9, 10})
    if not color:
        return lines
    # Colour after aligning: escape codes would count as width.
    coloured = [lines[0]]
    for line, w in zip(lines[1:], workflows, strict=True):
        state = str(w.state)
        coloured.append(line.replace(f" {state} ", f" {paint(state, state, True)} ", 1))
    return coloured


# -- show: header ---------------------------------------------------------------------


def header_lines(info: WorkflowInfo, now: datetime, *, color: bool) -> list[str]:
    """The workflow's own lines above the DAG: state, counts, times and labels."""
    state = str(info.state)
    title = f"workflow {info.id} {info.name}: {paint(state, state, color)}"
    if info.cancel_requested and state == "running":
        title += " (cancel requested)"
    lines = [title, f"  nodes:    {info.node_count} ({counts_text(info.counts)})"]
    lines.append(
        f"  created:  {info.created_at.isoformat(timespec='seconds')} "
        f"({age(info.created_at, now)} ago)"
    )
    if info.finished_at is not None:
        took = format_duration((info.finished_at - info.created_at).total_seconds())
        lines.append(f"  finished: {info.finished_at.isoformat(timespec='seconds')} (took {took})")
    for label, value in (
        ("key", info.idempotency_key),
        ("schedule", info.schedule),
        ("producer", info.producer),
    ):
        if value:
            lines.append(f"  {label + ':':<9} {value}")
    return lines


# -- show: the DAG --------------------------------------------------------------------


@dataclass(slots=True)
class Group:
    """One line of the drawing: a single node, or siblings collapsed together.

    ``shared`` is True when every node of a collapsed group has the same
    parents (a fan-out), False when each has its own parents in the same
    collapsed groups (``post-i`` after ``part-i``: parallel branches).
    """

    level: int
    nodes: list[NodeInfo] = field(default_factory=list)
    shared: bool = True

    @property
    def collapsed(self) -> bool:
        """True when the line stands for several nodes."""
        return len(self.nodes) > 1

    @property
    def label(self) -> str:
        """The node's name, or ``first … last`` for a collapsed group."""
        if not self.collapsed:
            node = self.nodes[0]
            return node.node + (" (input)" if node.task == INPUT_TASK else "")
        return f"{self.nodes[0].node} {ELLIPSIS} {self.nodes[-1].node}"


def levels(nodes: Sequence[NodeInfo]) -> dict[str, int]:
    """Each node's depth: 0 without parents, else one more than its deepest parent.

    ``nodes`` come parents first (``workflow_nodes`` orders by id, and a
    workflow's nodes are inserted parents first); a parent not seen yet (which
    that order rules out) counts as level 0 rather than failing the drawing.
    """
    depth: dict[str, int] = {}
    for node in nodes:
        depth[node.node] = 1 + max((depth.get(p, 0) for p, _ in node.after), default=-1)
    return depth


#: A node's parents for grouping: (("g", group number) or ("n", name), requires), sorted.
Signature = tuple[tuple[tuple[str, str], str], ...]


def group_nodes(nodes: Sequence[NodeInfo], *, collapse_at: int = COLLAPSE_AT) -> list[Group]:
    """The lines of the drawing, by level, then by first node; siblings collapsed.

    Siblings are nodes of one level with the same task and the same parents
    (with the same requirements): a fan-out. Nodes of one level with the same
    task whose parents differ but lie in the same collapsed groups (each
    ``post-i`` after its ``part-i``) are parallel branches, collapsed too, so
    a fan-out followed by a step per branch stays one line per step. A set of
    at least ``collapse_at`` nodes is one line; ``collapse_at=0`` draws every
    node on its own line. Levels are grouped in order, so a node's parents
    have their groups before it is grouped.
    """
    depth = levels(nodes)
    by_level: dict[int, list[NodeInfo]] = {}
    for node in nodes:
        by_level.setdefault(depth[node.node], []).append(node)
    group_of: dict[str, Group] = {}
    index: dict[int, int] = {}  # id(group) -> its number, for parent signatures
    groups: list[Group] = []

    def keep(group: Group) -> None:
        groups.append(group)
        index[id(group)] = len(index)
        for n in group.nodes:
            group_of[n.node] = group

    for level in sorted(by_level):
        same_parents: dict[tuple[object, ...], list[NodeInfo]] = {}
        for node in by_level[level]:
            same_parents.setdefault((node.task, tuple(sorted(node.after))), []).append(node)
        left: list[NodeInfo] = []
        for members in same_parents.values():
            if collapse_at and len(members) >= collapse_at:
                keep(Group(level, members))
            else:
                left.extend(members)
        parallel: dict[tuple[str, Signature], list[NodeInfo]] = {}
        for node in left:
            parallel.setdefault((node.task, _signature(node, group_of, index)), []).append(node)
        for (_, signature), members in parallel.items():
            in_groups = any(kind == "g" for (kind, _), _ in signature)
            if collapse_at and len(members) >= collapse_at and in_groups:
                keep(Group(level, sorted(members, key=lambda n: n.job_id), shared=False))
            else:
                for n in members:
                    keep(Group(level, [n]))
    groups.sort(key=lambda g: (g.level, g.nodes[0].job_id))
    return groups


def _signature(node: NodeInfo, group_of: dict[str, Group], index: dict[int, int]) -> Signature:
    """A node's parents with each one in a collapsed group replaced by that group."""
    keys = []
    for parent, requires in node.after:
        group = group_of.get(parent)
        if group is not None and group.collapsed:
            keys.append((("g", str(index[id(group)])), requires))
        else:
            keys.append((("n", parent), requires))
    return tuple(sorted(keys))


def parallel_after_text(group: Group, group_of: dict[str, Group]) -> str:
    """The parents of parallel branches: ``part-0 … part-9 (one each)``."""
    counts: Counter[tuple[int, str]] = Counter()
    names: list[str] = []
    seen: set[tuple[int, str]] = set()
    first = group.nodes[0]
    for parent, requires in first.after:
        parent_group = group_of.get(parent)
        if parent_group is not None and parent_group.collapsed:
            counts[(id(parent_group), requires)] += 1
    for parent, requires in first.after:
        mark = " (finished)" if requires == "finished" else ""
        parent_group = group_of.get(parent)
        if parent_group is None or not parent_group.collapsed:
            names.append(f"{parent}{mark}")
            continue
        key = (id(parent_group), requires)
        if key in seen:
            continue
        seen.add(key)
        each = "one" if counts[key] == 1 else str(counts[key])
        names.append(f"{parent_group.label}{mark} ({each} each)")
    if len(names) > MAX_NAMES:
        names = [*names[:MAX_NAMES], f"{ELLIPSIS} {len(names) - MAX_NAMES} more"]
    return ", ".join(names)


def after_text(node: NodeInfo, group_of: dict[str, Group]) -> str:
    """A node's parents, with a collapsed group named once when the node is after all of it."""
    per_group: Counter[tuple[int, str]] = Counter()
    for parent, requires in node.after:
        group = group_of.get(parent)
        if group is not None and group.collapsed:
            per_group[(id(group), requires)] += 1
    names: list[str] = []
    done: set[tuple[int, str]] = set()
    for parent, requires in node.after:
        mark = " (finished)" if requires == "finished" else ""
        group = group_of.get(parent)
        if group is not None and group.collapsed:
            key = (id(group), requires)
            if per_group[key] == len(group.nodes):
                if key not in done:
                    done.add(key)
                    names.append(f"{group.label}{mark}")
                continue
        names.append(f"{parent}{mark}")
    if len(names) > MAX_NAMES:
        names = [*names[:MAX_NAMES], f"{ELLIPSIS} {len(names) - MAX_NAMES} more"]
    return ", ".join(names)


@dataclass(frozen=True, slots=True)
class _Line:
    level: int
    name: str
    state: str
    state_text: str
    attempt: str
    duration: str
    after: str
    notes: list[str]


def _single(group: Group, group_of: dict[str, Group], now: datetime) -> _Line:
    node = group.nodes[0]
    state = node_state(node)
    notes = []
    if node.error and state in BAD_STATES | {"skipped"}:
        notes.append(f"error: {error_line(node.error)}")
    return _Line(
        level=group.level,
        name=group.label,
        state=state,
        state_text=state,
        attempt="-" if node.task == INPUT_TASK else f"{node.attempt}/{node.max_attempts}",
        # An input node does not run: its recorded 0 ms would only mislead.
        duration="-" if node.task == INPUT_TASK else format_duration(node_duration(node, now)),
        after=after_text(node, group_of),
        notes=notes,
    )


def _collapsed(group: Group, group_of: dict[str, Group], now: datetime) -> _Line:
    states = Counter(node_state(n) for n in group.nodes)
    worst = next((s for s in ("failed", "lost", "canceled") if states.get(s)), None)
    main = worst or (next(iter(states)) if len(states) == 1 else "mixed")
    durations = [d for n in group.nodes if (d := node_duration(n, now)) is not None]
    duration = "-"
    if durations:
        low, high = min(durations), max(durations)
        duration = format_duration(low)
        if format_duration(high) != duration:
            duration += f"-{format_duration(high)}"
    bad = [n.node for n in group.nodes if node_state(n) in BAD_STATES]
    notes = []
    if bad:
        shown = ", ".join(bad[:MAX_NAMES]) + (f", {ELLIPSIS}" if len(bad) > MAX_NAMES else "")
        notes.append(f"failed, lost or canceled: {shown} ({len(bad)})")
    attempts = {n.attempt for n in group.nodes}
    return _Line(
        level=group.level,
        name=f"{group.label} ({len(group.nodes)} nodes: {counts_text(states)})",
        state=main,
        state_text="",
        attempt=f"{min(attempts)}-{max(attempts)}" if len(attempts) > 1 else str(min(attempts)),
        duration=duration,
        after=(
            after_text(group.nodes[0], group_of)
            if group.shared
            else parallel_after_text(group, group_of)
        ),
        notes=notes,
    )


def error_line(text: str) -> str:
    """The line of an error that says what happened, at most 200 characters.

    A handler's error is stored as a traceback, whose first line says nothing
    ("Traceback (most recent call last):") and whose last says what was raised.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line[:200]


def dag_lines(
    nodes: Sequence[NodeInfo],
    now: datetime,
    *,
    color: bool,
    collapse_at: int = COLLAPSE_AT,
) -> list[str]:
    """The DAG, by level: one line per node or collapsed sibling group, tree glyphs per level.

    ::

        level 0
          └─ fetch                        succeeded   1/3  210ms
        level 1
          └─ part-0 … part-4 (5 nodes: 5 succeeded)  attempt 1  200ms-310ms  after: fetch
        level 2
          ├─ merge                        succeeded   1/3  52ms   after: part-0 … part-4
          └─ report                       succeeded   1/3  11ms   after: fetch (finished)
    """
    if not nodes:
        return ["(no nodes)"]
    groups = group_nodes(nodes, collapse_at=collapse_at)
    group_of = {n.node: g for g in groups for n in g.nodes}
    lines = [
        _collapsed(g, group_of, now) if g.collapsed else _single(g, group_of, now) for g in groups
    ]
    singles = [ln for ln in lines if ln.state_text]
    name_w = max((len(ln.name) for ln in singles), default=0)
    state_w = max((len(ln.state_text) for ln in singles), default=0)
    attempt_w = max((len(ln.attempt) for ln in singles), default=0)
    duration_w = max((len(ln.duration) for ln in singles), default=0)
    out: list[str] = []
    for i, ln in enumerate(lines):
        if i == 0 or lines[i - 1].level != ln.level:
            out.append(f"level {ln.level}")
        last = i + 1 == len(lines) or lines[i + 1].level != ln.level
        glyph, rest = ("└─ ", "   ") if last else ("├─ ", "│  ")
        after = f"  after: {ln.after}" if ln.after else ""
        if ln.state_text:
            state = paint(ln.state_text.ljust(state_w), ln.state, color)
            text = (
                f"{ln.name.ljust(name_w)}  {state}  {ln.attempt.rjust(attempt_w)}  "
                f"{ln.duration.rjust(duration_w)}{after}"
            )
        else:
            text = f"{paint(ln.name, ln.state, color)}  attempt {ln.attempt}  {ln.duration}{after}"
        out.append(f"  {glyph}{text}".rstrip())
        out.extend(f"  {rest}  {note}" for note in ln.notes)
    return out


def show_lines(
    info: WorkflowInfo,
    nodes: Sequence[NodeInfo],
    now: datetime,
    *,
    color: bool,
    collapse_at: int = COLLAPSE_AT,
) -> list[str]:
    """``workflows show``: the header, a blank line, then the DAG."""
    return [
        *header_lines(info, now, color=color),
        "",
        *dag_lines(nodes, now, color=color, collapse_at=collapse_at),
    ]
