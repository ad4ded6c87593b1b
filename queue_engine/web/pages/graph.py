"""The workflow page's drawing: a DAG laid out as boxes in columns with edges (pure functions).

The boxes are the groups of :func:`queue_engine.operator.workflow_layout.group_nodes`
(one per node, or per fan-out folded into one), so the drawing's size follows
the number of groups, not of nodes. A layered layout (after Sugiyama), small
enough to read in one sitting:

1. **Columns** are depth levels, left to right (a laptop screen is wider than
   tall). An edge that skips columns gets a *waypoint* in each column it
   crosses, so it runs between the boxes there, not through them.
2. **Order** in each column: a few sweeps each way sort the boxes and
   waypoints by the mean position of their neighbours in the column before
   (then after), which removes most crossings a real workflow has.
3. **Rows**: each box is pulled to the middle of its neighbours while keeping
   the column's order and gaps. That is an isotonic regression, solved exactly
   by pooling adjacent violators, so a fan-in's child sits level with the
   middle of its parents and a chain draws as a straight line.

Bounds: a workflow whose groups are still too many (10,000 distinct tasks, a
10,000-link chain) is folded coarser (one box per task and level), then cut
at :data:`MAX_BOXES` with the rest counted, and waypoints stop at
:data:`MAX_WAYPOINTS` (further long edges are drawn straight). Every step is
linear or ``n log n`` in boxes plus edges, so the page's render time and its
SVG stay bounded whatever the workflow's size.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from queue_engine.operator import workflow_layout as layout

#: Most boxes drawn; past it the groups are folded coarser, then cut.
MAX_BOXES = 150
#: Most waypoints (column crossings of long edges) routed between boxes.
MAX_WAYPOINTS = 2000
#: Sweeps of the ordering, each one down and one up.
SWEEPS = 4
#: Passes of the row placement, each one down and one up.
PASSES = 3
#: Height of a waypoint: the room one passing edge takes in a column.
WAYPOINT_HEIGHT = 8.0


@dataclass(frozen=True, slots=True)
class Link:
    """An edge between two boxes (indexes into the box list).

    ``finished``: the child waits for the parent to end in any way (dashed);
    ``each``: parallel branches, each node after its own parent (``post-i``
    after ``part-i``), not every child after every parent.
    """

    source: int
    target: int
    finished: bool = False
    each: bool = False


@dataclass(frozen=True, slots=True)
class Folded:
    """The groups to draw, and what did not fit (counted for the page to say so)."""

    groups: list[layout.Group]
    links: list[Link]
    hidden_groups: int = 0
    hidden_nodes: int = 0
    coarser: bool = False


def group_links(groups: Sequence[layout.Group]) -> list[Link]:
    """The edges between groups, once per pair, from the nodes' ``after`` lists."""
    index = {n.node: i for i, g in enumerate(groups) for n in g.nodes}
    finished: dict[tuple[int, int], bool] = {}
    pairs: dict[tuple[int, int], int] = defaultdict(int)
    for target, group in enumerate(groups):
        # A fan-out's nodes share their parents: the first one says them all.
        readers = group.nodes[:1] if group.collapsed and group.shared else group.nodes
        for node in readers:
            for parent, requires in node.after:
                source = index.get(parent)
                if source is None or source == target:
                    continue
                key = (source, target)
                pairs[key] += 1
                finished[key] = finished.get(key, True) and requires == "finished"
    links = []
    for (source, target), count in pairs.items():
        whole = len(groups[source].nodes) * len(groups[target].nodes)
        each = groups[target].collapsed and not groups[target].shared and count < whole
        links.append(Link(source, target, finished[(source, target)], each))
    links.sort(key=lambda k: (k.source, k.target))
    return links


def fold(groups: list[layout.Group], limit: int = MAX_BOXES) -> Folded:
    """Groups and links within ``limit`` boxes: folded by task and level, then cut if need be."""
    coarser = False
    if len(groups) > limit:
        merged: dict[tuple[int, str], layout.Group] = {}
        for group in groups:
            key = (group.level, group.nodes[0].task)
            into = merged.setdefault(key, layout.Group(group.level, [], shared=False))
            into.nodes.extend(group.nodes)
        if len(merged) < len(groups):  # a chain, say, has nothing to fold together
            coarser = True
            groups = sorted(
                merged.values(), key=lambda g: (g.level, min(n.job_id for n in g.nodes))
            )
            for group in groups:
                group.nodes.sort(key=lambda n: n.job_id)
    hidden = groups[limit:]
    kept = groups[:limit]
    return Folded(
        groups=kept,
        links=group_links(kept),
        hidden_groups=len(hidden),
        hidden_nodes=sum(len(g.nodes) for g in hidden),
        coarser=coarser,
    )


# -- the layered layout -----------------------------------------------------------


@dataclass(slots=True)
class _Item:
    """A box or a waypoint in one column."""

    column: int
    height: float
    box: int | None
    before: list[int] = field(default_factory=list)  # items in the column to the left
    after: list[int] = field(default_factory=list)  # items in the column to the right
    rank: float = 0.0
    y: float = 0.0


@dataclass(frozen=True, slots=True)
class Route:
    """One edge as drawn: its link and the SVG path through its waypoints."""

    link: Link
    path: str


@dataclass(frozen=True, slots=True)
class Drawing:
    """Where each box goes (``x``, ``y`` of its top left) and each edge's path; the whole size."""

    x: list[float]
    y: list[float]
    routes: list[Route]
    width: float
    height: float


def place(
    columns: Sequence[int],
    heights: Sequence[float],
    links: Sequence[Link],
    *,
    box_width: float,
    gap_x: float,
    gap_y: float,
    margin: float = 8.0,
    max_waypoints: int = MAX_WAYPOINTS,
) -> Drawing:
    """Lay out boxes in ``columns`` (their levels) with ``links`` between them.

    Links go from a lower column to a higher one (a DAG by levels); one that
    does not is drawn straight, without waypoints.
    """
    items = [_Item(c, h, i) for i, (c, h) in enumerate(zip(columns, heights, strict=True))]
    chains: list[list[int]] = []  # per link: the items it passes, ends included
    budget = max_waypoints
    for link in links:
        chain = [link.source]
        start, end = columns[link.source], columns[link.target]
        crossings = end - start - 1
        if 0 <= crossings <= budget:
            budget -= crossings
            for column in range(start + 1, end):
                items.append(_Item(column, WAYPOINT_HEIGHT, None))
                chain.append(len(items) - 1)
        chain.append(link.target)
        chains.append(chain)
        for a, b in itertools.pairwise(chain):
            if items[b].column == items[a].column + 1:
                items[a].after.append(b)
                items[b].before.append(a)
    by_column: dict[int, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        by_column[item.column].append(i)
    order = [by_column[c] for c in sorted(by_column)]
    _order(items, order)
    _rows(items, order, gap_y)
    top = min((items[i].y for column in order for i in column), default=0.0)
    x_of = {c: margin + c * (box_width + gap_x) for c in sorted(by_column)}
    for item in items:
        item.y += margin - top
    routes = [
        Route(link, _path(items, chain, x_of, box_width))
        for link, chain in zip(links, chains, strict=True)
    ]
    last = max(by_column, default=0)
    width = x_of.get(last, margin) + box_width + margin
    height = max((it.y + it.height for it in items), default=0.0) + margin
    return Drawing(
        x=[x_of[c] for c in columns],
        y=[items[i].y for i in range(len(columns))],
        routes=routes,
        width=width,
        height=height,
    )


def _order(items: list[_Item], order: list[list[int]]) -> None:
    """Sort each column by the barycentre of its neighbours, sweeping down and up."""
    for column in order:
        for rank, i in enumerate(column):
            items[i].rank = float(rank)
    for _ in range(SWEEPS):
        for columns, side in ((order[1:], "before"), (order[-2::-1], "after")):
            for column in columns:
                keyed = []
                for position, i in enumerate(column):
                    near = getattr(items[i], side)
                    centre = sum(items[n].rank for n in near) / len(near) if near else None
                    keyed.append((items[i].rank if centre is None else centre, position, i))
                keyed.sort()
                column[:] = [i for _, _, i in keyed]
                for rank, i in enumerate(column):
                    items[i].rank = float(rank)


def _rows(items: list[_Item], order: list[list[int]], gap: float) -> None:
    """Place each column top-down: every item as near its neighbours' middle as the order allows."""
    for column in order:
        y = 0.0
        for i in column:
            items[i].y = y
            y += items[i].height + gap
    for _ in range(PASSES):
        for columns, side in ((order[1:], "before"), (order[-2::-1], "after")):
            for column in columns:
                wanted = []
                for i in column:
                    near = getattr(items[i], side)
                    if near:
                        middle = sum(items[n].y + items[n].height / 2 for n in near) / len(near)
                        wanted.append(middle - items[i].height / 2)
                    else:
                        wanted.append(items[i].y)
                for i, y in zip(
                    column,
                    _ordered_fit(wanted, [items[i].height for i in column], gap),
                    strict=True,
                ):
                    items[i].y = y


def _ordered_fit(wanted: list[float], heights: list[float], gap: float) -> list[float]:
    """Tops nearest ``wanted`` (least squares) keeping order and gaps: pool adjacent violators.

    With ``offset[i]`` the room the items above ``i`` take, ``z = y - offset``
    must not decrease; the best such ``z`` is the isotonic regression of
    ``wanted - offset``, whose blocks each take the mean of what they pool.
    """
    offsets = []
    room = 0.0
    for h in heights:
        offsets.append(room)
        room += h + gap
    blocks: list[list[float]] = []  # [mean, count]
    for target in (w - o for w, o in zip(wanted, offsets, strict=True)):
        blocks.append([target, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, count = blocks.pop()
            total = blocks[-1][0] * blocks[-1][1] + mean * count
            blocks[-1][1] += count
            blocks[-1][0] = total / blocks[-1][1]
    z = [mean for mean, count in blocks for _ in range(int(count))]
    return [value + offset for value, offset in zip(z, offsets, strict=True)]


def _path(items: list[_Item], chain: list[int], x_of: dict[int, float], width: float) -> str:
    """The SVG path of one edge: out of its source's right side, through its waypoints, in at the left."""
    points: list[tuple[float, float]] = []
    for position, i in enumerate(chain):
        item = items[i]
        x, middle = x_of[item.column], item.y + item.height / 2
        if item.box is None:
            points += [(x, middle), (x + width, middle)]
        elif position == 0:
            points.append((x + width, middle))
        else:
            points.append((x, middle))
    parts = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if y0 == y1:
            parts.append(f"L{x1:.1f},{y1:.1f}")
        else:
            bend = max((x1 - x0) / 2, 12.0)
            parts.append(f"C{x0 + bend:.1f},{y0:.1f} {x1 - bend:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")
    return " ".join(parts)
