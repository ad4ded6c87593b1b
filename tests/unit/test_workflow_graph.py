"""The workflow page's graph: folding and the layered layout (pure functions, no database).

Edges join the folded groups once per pair (a 10,000-node fan-out and its
fan-in are three boxes and two edges); a workflow with too many groups is
folded coarser and then cut, with the rest counted; boxes never overlap; an
edge that skips a column runs between the boxes there; crossings of a simple
"X" are undone; a chain draws straight and a fan-in's child sits level with
the middle of its parents. The page that draws it is checked in
tests/integration/test_dashboard_workflows.py.
"""

from __future__ import annotations

import itertools
import re

import pytest
from support.nodes import node

from queue_engine.operator import workflow_layout as layout
from queue_engine.web.pages import graph
from queue_engine.web.pages.graph import Link

BOX = {"box_width": 100.0, "gap_x": 40.0, "gap_y": 10.0}


def folded(nodes: list[object]) -> graph.Folded:
    return graph.fold(layout.group_nodes(nodes))  # type: ignore[arg-type]


def labels(f: graph.Folded) -> list[str]:
    return [g.label for g in f.groups]


def test_a_ten_thousand_node_fan_out_is_three_boxes_and_two_edges() -> None:
    nodes = [node("split")]
    nodes += [node(f"chunk-{i}", after=["split"]) for i in range(10_000)]
    nodes.append(node("combine", after=[f"chunk-{i}" for i in range(10_000)]))
    f = folded(nodes)
    assert labels(f) == ["split", "chunk-0 … chunk-9999", "combine"]
    assert f.links == [Link(0, 1), Link(1, 2)]
    assert (f.hidden_groups, f.coarser) == (0, False)


def test_links_say_finished_and_parallel_branches() -> None:
    nodes = [node("fetch")]
    nodes += [node(f"part-{i}", after=["fetch"]) for i in range(5)]
    nodes += [node(f"post-{i}", after=[f"part-{i}"], task="t.post") for i in range(5)]
    nodes.append(node("check", after=["fetch"], task="t.check"))
    nodes.append(node("report", after=["check"], task="t.report", requires={"check": "finished"}))
    f = folded(nodes)
    by_label = {g.label: i for i, g in enumerate(f.groups)}
    links = {(f.groups[k.source].label, f.groups[k.target].label): k for k in f.links}
    assert set(links) == {
        ("fetch", "part-0 … part-4"),
        ("part-0 … part-4", "post-0 … post-4"),
        ("fetch", "check"),
        ("check", "report"),
    }
    assert links[("part-0 … part-4", "post-0 … post-4")].each
    assert not links[("fetch", "part-0 … part-4")].each
    assert links[("check", "report")].finished and not links[("fetch", "check")].finished
    assert by_label["fetch"] == 0


def test_too_many_groups_are_folded_by_task_then_cut_and_counted() -> None:
    # 400 single nodes of two tasks in one level (as if their parents all differed).
    root = node("root")
    singles = [layout.Group(0, [root])]
    singles += [
        layout.Group(1, [node(f"n{i}", after=["root"], task=f"t.{i % 2}")]) for i in range(400)
    ]
    f = graph.fold(singles, limit=10)
    assert f.coarser and f.hidden_groups == 0
    assert labels(f) == ["root", "n0 … n398", "n1 … n399"]
    assert f.links == [Link(0, 1), Link(0, 2)]
    # A 10,000-link chain cannot fold: the first boxes are drawn, the rest counted.
    chain = [node("c0")] + [node(f"c{i}", after=[f"c{i - 1}"]) for i in range(1, 10_000)]
    f = graph.fold(layout.group_nodes(chain))
    assert len(f.groups) == graph.MAX_BOXES and not f.coarser
    assert (f.hidden_groups, f.hidden_nodes) == (10_000 - graph.MAX_BOXES,) * 2
    assert len(f.links) == graph.MAX_BOXES - 1
    drawing = graph.place([g.level for g in f.groups], [40.0] * len(f.groups), f.links, **BOX)
    assert len(drawing.routes) == graph.MAX_BOXES - 1


def overlaps(
    columns: list[int], heights: list[float], d: graph.Drawing, gap: float
) -> list[tuple[int, int]]:
    found = []
    for a in range(len(columns)):
        for b in range(a + 1, len(columns)):
            if columns[a] != columns[b]:
                continue
            top, bottom = sorted((a, b), key=lambda i: d.y[i])
            if d.y[top] + heights[top] + gap > d.y[bottom] + 1e-6:
                found.append((a, b))
    return found


def test_a_chain_draws_straight_and_a_fan_in_sits_between_its_parents() -> None:
    chain = graph.place([0, 1, 2], [40.0, 40.0, 40.0], [Link(0, 1), Link(1, 2)], **BOX)
    assert chain.y[0] == chain.y[1] == chain.y[2]
    assert chain.x == [8.0, 148.0, 288.0]
    assert chain.routes[0].path == "M108.0,28.0 L148.0,28.0"
    # Three parents, one child: the child's middle is their middles' mean.
    columns, heights = [0, 0, 0, 1], [40.0, 60.0, 40.0, 40.0]
    d = graph.place(columns, heights, [Link(0, 3), Link(1, 3), Link(2, 3)], **BOX)
    middles = [d.y[i] + heights[i] / 2 for i in range(3)]
    assert d.y[3] + 20 == pytest.approx(sum(middles) / 3)
    assert overlaps(columns, heights, d, 10.0) == []


def test_an_x_is_uncrossed() -> None:
    # a0 → b1 and a1 → b0, given crossed: the ordering swaps b0 and b1.
    d = graph.place([0, 0, 1, 1], [40.0] * 4, [Link(0, 3), Link(1, 2)], **BOX)
    assert (d.y[0] < d.y[1]) == (d.y[3] < d.y[2])


def test_a_long_edge_runs_between_the_boxes_of_the_columns_it_crosses() -> None:
    # a → b → c → d, and a → d across the two middle columns, beside another box in each.
    columns = [0, 1, 2, 3, 1, 2]
    heights = [40.0] * 6
    links = [Link(0, 1), Link(1, 2), Link(2, 3), Link(0, 3), Link(0, 4), Link(4, 5)]
    d = graph.place(columns, heights, links, **BOX)
    assert overlaps(columns, heights, d, 10.0) == []
    long_edge = next(r for r in d.routes if r.link == Link(0, 3)).path
    # Through column 1 and column 2 as straight runs (L), at heights clear of every box there.
    steps = points(long_edge)
    crossed = [
        (x0, y0)
        for (_, (x0, y0)), (command, (x1, y1)) in itertools.pairwise(steps)
        if command == "L" and x1 - x0 == 100.0 and y0 == y1
    ]
    assert [x for x, _ in crossed] == [148.0, 288.0]
    for x, y in crossed:
        column = 1 if x == 148.0 else 2
        for i, c in enumerate(columns):
            if c == column:
                assert not d.y[i] <= y <= d.y[i] + heights[i], (x, y, i)


def points(path: str) -> list[tuple[str, tuple[float, float]]]:
    """Each command of an SVG path with the point it ends at."""
    found = []
    for command, coordinates in re.findall(r"([MLC])([^MLC]+)", path):
        x, y = coordinates.split()[-1].split(",")
        found.append((command, (float(x), float(y))))
    return found


def test_no_two_boxes_of_a_column_overlap_in_a_busy_graph() -> None:
    columns = [0] * 6 + [1] * 8 + [2] * 5
    heights = [40.0 if i % 3 else 66.0 for i in range(len(columns))]
    links = [Link(i, 6 + (i * 3) % 8) for i in range(6)]
    links += [Link(6 + i, 14 + (i * 2) % 5) for i in range(8)]
    links += [Link(0, 14), Link(5, 18)]
    d = graph.place(columns, heights, links, **BOX)
    assert overlaps(columns, heights, d, 10.0) == []
    assert d.height >= max(d.y[i] + heights[i] for i in range(len(columns)))
    assert min(d.y) == 8.0


def test_ordered_fit_keeps_order_and_gaps_nearest_to_what_is_wanted() -> None:
    fit = graph._ordered_fit
    assert fit([0.0, 100.0], [10.0, 10.0], 5.0) == [0.0, 100.0]  # room enough: as wanted
    assert fit([50.0, 50.0], [10.0, 10.0], 5.0) == [42.5, 57.5]  # pooled around their mean
    assert fit([50.0, 0.0, 100.0], [10.0, 10.0, 10.0], 0.0) == [20.0, 30.0, 100.0]
