"""Contract of ``queue-ctl workflows`` drawings (pure functions, no database).

Levels follow the deepest parent; siblings with the same task and parents
collapse into one line from COLLAPSE_AT on (a 10,000-node fan-out is one line
with its counts, and the fan-in names the group, not 10,000 parents); a chain
is one line per link; input nodes say ``awaiting input``; colour is escape
codes only when asked, and alignment does not count them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from support.nodes import node

from queue_engine.cli import workflow_render as wr
from queue_engine.producer.workflows.model import WorkflowInfo, WorkflowState
from queue_engine.producer.workflows.spec import INPUT_TASK

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def info(**kw: Any) -> WorkflowInfo:
    base: dict[str, Any] = {
        "id": 7,
        "name": "nightly",
        "state": WorkflowState.RUNNING,
        "node_count": 3,
        "counts": {
            "unfinished": 1,
            "succeeded": 2,
            "failed": 0,
            "canceled": 0,
            "lost": 0,
            "skipped": 0,
        },
        "idempotency_key": None,
        "producer": None,
        "schedule": None,
        "cancel_requested": False,
        "created_at": NOW - timedelta(seconds=90),
        "finished_at": None,
    }
    base.update(kw)
    return WorkflowInfo(**base)


def plain(lines: list[str]) -> str:
    return "\n".join(lines)


def test_levels_follow_the_deepest_parent() -> None:
    nodes = [node("a"), node("b", after=["a"]), node("c", after=["a", "b"]), node("d")]
    assert wr.levels(nodes) == {"a": 0, "b": 1, "c": 2, "d": 0}


def test_a_diamond_draws_each_node_with_its_parents() -> None:
    nodes = [
        node("fetch"),
        node("left", after=["fetch"], task="t.l"),
        node("right", after=["fetch"], task="t.r", status="running", duration_ms=None),
        node("join", after=["left", "right"], status="waiting", attempt=0, pending=1),
    ]
    out = wr.dag_lines(nodes, NOW, color=False)
    assert out[0] == "level 0"
    assert out[1].startswith("  └─ fetch ") and "succeeded" in out[1] and "1/3" in out[1]
    assert out[2] == "level 1"
    assert out[3].startswith("  ├─ left ") and out[3].endswith("after: fetch")
    assert out[4].startswith("  └─ right ") and "running" in out[4]
    assert out[6].startswith("  └─ join ") and out[6].endswith("after: left, right")
    assert "waiting" in out[6] and "0/3" in out[6]
    # Columns line up: every state starts at the same offset.
    starts = {
        line.find(state)
        for line, state in (
            (out[1], "succeeded"),
            (out[3], "succeeded"),
            (out[4], "running"),
            (out[6], "waiting"),
        )
    }
    assert len(starts) == 1, out


def test_a_wide_fan_out_collapses_into_one_line_with_counts() -> None:
    parts = [f"parse-{i}" for i in range(10_000)]
    nodes = [node("fetch")]
    nodes += [
        node(
            p, after=["fetch"], task="etl.parse", status="failed" if i % 1000 == 7 else "succeeded"
        )
        for i, p in enumerate(parts)
    ]
    nodes.append(node("aggregate", after=parts, status="canceled", attempt=0))
    out = wr.dag_lines(nodes, NOW, color=False)
    assert len(out) < 10, out
    (group,) = [line for line in out if "parse-0 … parse-9999" in line and "nodes" in line]
    assert "(10000 nodes: 9990 succeeded, 10 failed)" in group
    assert group.endswith("after: fetch")
    (failed,) = [line for line in out if "failed, lost or canceled:" in line]
    assert "parse-7, parse-1007" in failed and "(10)" in failed
    (agg,) = [line for line in out if "aggregate" in line]
    assert agg.endswith("after: parse-0 … parse-9999")


def test_siblings_below_the_threshold_or_with_other_parents_stay_apart() -> None:
    nodes = [node("a"), node("b")]
    nodes += [node(f"x{i}", after=["a"]) for i in range(wr.COLLAPSE_AT - 1)]
    nodes += [node(f"y{i}", after=["b"]) for i in range(wr.COLLAPSE_AT)]
    out = plain(wr.dag_lines(nodes, NOW, color=False))
    assert all(f"─ x{i} " in out for i in range(wr.COLLAPSE_AT - 1))
    assert f"y0 … y{wr.COLLAPSE_AT - 1} ({wr.COLLAPSE_AT} nodes" in out
    expanded = plain(wr.dag_lines(nodes, NOW, color=False, collapse_at=0))
    assert "…" not in expanded and "─ y0 " in expanded


def test_a_child_after_part_of_a_group_names_those_parents() -> None:
    nodes = [node("f")]
    nodes += [node(f"p{i}", after=["f"]) for i in range(5)]
    nodes.append(node("some", after=["p1", "p3"]))
    nodes.append(node("all", after=[f"p{i}" for i in range(5)], requires={"p0": "finished"}))
    out = plain(wr.dag_lines(nodes, NOW, color=False))
    assert "after: p1, p3" in out
    # A group whose edges differ in requirement is not named as a whole for that requirement.
    assert "after: p0 (finished), p1, p2, p3, p4" in out


def test_a_long_parent_list_is_cut_with_a_count() -> None:
    nodes = [node(f"r{i}", task=f"t{i}") for i in range(10)]
    nodes.append(node("sink", after=[f"r{i}" for i in range(10)]))
    (sink,) = [line for line in wr.dag_lines(nodes, NOW, color=False) if "sink" in line]
    assert sink.endswith("after: r0, r1, r2, r3, r4, r5, … 4 more")


def test_a_chain_is_one_line_per_link_and_finished_edges_are_marked() -> None:
    nodes = [node("s0")]
    nodes += [node(f"s{i}", after=[f"s{i - 1}"]) for i in range(1, 50)]
    nodes.append(node("report", after=["s49"], requires={"s49": "finished"}))
    out = wr.dag_lines(nodes, NOW, color=False)
    assert len(out) == 2 * 51
    assert out[-1].endswith("after: s49 (finished)")


def test_input_nodes_show_awaiting_input_or_waiting_and_no_attempt() -> None:
    nodes = [
        node("a", status="running", duration_ms=None, started_at=NOW - timedelta(seconds=3)),
        node("approve", task=INPUT_TASK, status="waiting", pending=0, after=[]),
        node("later", task=INPUT_TASK, status="waiting", pending=1, after=["a"]),
    ]
    out = plain(wr.dag_lines(nodes, NOW, color=False))
    assert "approve (input)" in out and "awaiting input" in out
    later = next(line for line in out.splitlines() if "later (input)" in line)
    assert " waiting " in later and "/" not in later.split("after")[0]
    # A running node shows how long it has run so far.
    assert "3.0s" in out


def test_errors_of_failed_nodes_are_shown_on_their_first_line() -> None:
    nodes = [node("a", status="failed", error="RuntimeError: boom\nmore\n")]
    out = wr.dag_lines(nodes, NOW, color=False)
    assert out[-1].strip() == "error: RuntimeError: boom"
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n'
    assert wr.error_line(traceback) == "ValueError: bad"


def test_color_only_when_asked_and_alignment_ignores_escape_codes() -> None:
    nodes = [node("a"), node("bb", after=["a"], status="failed"), node("c", after=["a"])]
    grey = wr.dag_lines(nodes, NOW, color=False)
    coloured = wr.dag_lines(nodes, NOW, color=True)
    assert not any("\x1b" in line for line in grey)
    assert any("\x1b[31" in line for line in coloured)  # failed in red
    assert [ANSI.sub("", line) for line in coloured] == grey


def test_header_and_list() -> None:
    head = wr.header_lines(info(idempotency_key="k1", cancel_requested=True), NOW, color=False)
    assert head[0] == "workflow 7 nightly: running (cancel requested)"
    assert head[1] == "  nodes:    3 (2 succeeded, 1 unfinished)"
    assert "(1m30s ago)" in head[2]
    assert any(line.strip() == "key:      k1" for line in head)
    done = info(
        state=WorkflowState.SUCCEEDED,
        finished_at=NOW - timedelta(seconds=30),
        cancel_requested=False,
    )
    assert wr.header_lines(done, NOW, color=False)[-1].endswith("(took 1m00s)")

    lines = wr.list_lines([done, info(id=6)], NOW, color=False)
    assert lines[0].split() == wr.LIST_HEADER
    assert lines[1].split() == [
        "7",
        "nightly",
        "succeeded",
        "3",
        "1",
        "2",
        "0",
        "0",
        "0",
        "0",
        "1m30s",
    ]
    coloured = wr.list_lines([done], NOW, color=True)
    assert "\x1b[32m" in coloured[1] and ANSI.sub("", coloured[1]) == lines[1]
    assert wr.list_lines([], NOW, color=False) == ["  ".join(wr.LIST_HEADER)]


def test_show_lines_and_no_nodes() -> None:
    out = wr.show_lines(info(), [], NOW, color=False)
    assert out[-2:] == ["", "(no nodes)"]


def test_parallel_branches_collapse_per_step_and_say_one_each() -> None:
    n = 1000
    nodes = [node("fetch")]
    nodes += [node(f"part-{i}", after=["fetch"], task="t.part") for i in range(n)]
    nodes += [
        node(f"post-{i}", after=[f"part-{i}"], task="t.post", status="running", duration_ms=None)
        for i in range(n)
    ]
    nodes.append(node("merge", after=[f"post-{i}" for i in range(n)], status="waiting"))
    out = wr.dag_lines(nodes, NOW, color=False)
    assert len(out) == 8, out
    post = next(line for line in out if "post-0 … post-999" in line and "nodes" in line)
    assert f"({n} nodes: {n} running)" in post
    assert post.endswith("after: part-0 … part-999 (one each)")
    assert out[-1].endswith("after: post-0 … post-999")


def test_branches_after_plain_nodes_are_not_collapsed() -> None:
    nodes = [node(f"a{i}", task=f"t{i}") for i in range(5)]
    nodes += [node(f"b{i}", after=[f"a{i}"], task="t.b") for i in range(5)]
    out = plain(wr.dag_lines(nodes, NOW, color=False))
    assert "…" not in out and all(f"─ b{i} " in out for i in range(5))
