"""How a workflow's DAG is laid out: levels, fan-outs folded, pure functions of the nodes.

Shared by the two faces that draw a workflow, ``queue-ctl workflows show``
(:mod:`queue_engine.cli.workflow_render`, text) and the dashboard's workflow
page (:mod:`queue_engine.web.pages.workflows`, HTML), so both fold the same
siblings and name the same parents. It lives in core because the web layer
may not import the command line.

A workflow may have 100,000 nodes, so the layout must stay small whatever its
size. Nodes are laid out **by depth level** (a node's level is one more than
its deepest parent's). Siblings that differ only by name (same level, same
task, same parents with the same requirements: a fan-out) are **collapsed**
into one group, ``parse-0 … parse-9999``, and a child after all of them names
the group by that same label rather than 10,000 names; parallel branches (each
``load-i`` after its own ``parse-i``) collapse likewise. So a 10,000-node
fan-out into one fan-in is three groups, and a chain is one group per link.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from queue_engine.operator.job_display import AWAITING_INPUT, awaiting_input
from queue_engine.producer.workflows.model import NodeInfo
from queue_engine.producer.workflows.spec import INPUT_TASK

#: Siblings are collapsed into one line from this many on (fewer read better one by one).
COLLAPSE_AT = 4
#: At most this many names in one ``after:`` or ``failed, lost or canceled:`` list.
MAX_NAMES = 6
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


def node_state(node: NodeInfo) -> str:
    """The state shown for a node: its job status, or ``awaiting input`` for a ready input node."""
    if awaiting_input(node.task, node.status, node.pending_parents):
        return AWAITING_INPUT
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


def error_line(text: str, limit: int | None = 200) -> str:
    """The line of an error that says what happened, at most ``limit`` characters (None: whole).

    A handler's error is stored as a traceback, whose first line says nothing
    ("Traceback (most recent call last):") and whose last says what was raised.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line if limit is None else line[:limit]
