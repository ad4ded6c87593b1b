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

The layout itself (levels, folded siblings, the ``after`` names) is
:mod:`queue_engine.operator.workflow_layout`, shared with the dashboard; its names are
re-exported here for the command's modules and tests. Nothing here reads the
database or the terminal: the command passes the
records, the current time and whether to colour, and tests call these
functions directly (tests/unit/test_workflow_render.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import click

from queue_engine.cli.render import table
from queue_engine.operator.stats import format_duration
from queue_engine.operator.workflow_layout import (
    BAD_STATES,
    COLLAPSE_AT,
    ELLIPSIS,
    MAX_NAMES,
    STATE_ORDER,
    Group,
    after_text,
    counts_text,
    error_line,
    group_nodes,
    levels,
    node_duration,
    node_state,
    parallel_after_text,
)
from queue_engine.producer.workflows.model import COUNT_NAMES, NodeInfo, WorkflowInfo
from queue_engine.producer.workflows.spec import INPUT_TASK

#: The layout's names the command's modules and tests read from here (re-exported).
__all__ = [
    "BAD_STATES",
    "COLLAPSE_AT",
    "ELLIPSIS",
    "MAX_NAMES",
    "STATE_ORDER",
    "Group",
    "after_text",
    "counts_text",
    "dag_lines",
    "error_line",
    "group_nodes",
    "header_lines",
    "levels",
    "list_lines",
    "node_duration",
    "node_state",
    "parallel_after_text",
    "show_lines",
]

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


def paint(text: str, state: str, color: bool) -> str:
    """``text`` in the colour of ``state`` when ``color`` is on (else unchanged)."""
    colour = STATE_COLOURS.get(state)
    if not color or colour is None:
        return text
    return click.style(text, fg=colour, bold=state in BAD_STATES)


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
