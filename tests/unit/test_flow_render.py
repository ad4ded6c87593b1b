"""The flow-control tables of ``stats``, ``top`` and ``limits list`` (pure: rows in, text out)."""

from __future__ import annotations

from datetime import UTC, datetime

from support.stats import queue_stats

from queue_engine.cli.flow_render import clip, flow_lines, keys_cells, partitions_cells
from queue_engine.cli.top import KEY_COLUMNS, PARTITION_COLUMNS, top_frame
from queue_engine.operator.flow import KeyFlow, PartitionFlow

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def key(
    name: str,
    running: int,
    limit: int | None,
    waiting: int = 0,
    *,
    own: bool = False,
    at_least: bool = False,
) -> KeyFlow:
    """A key's row; ``own``: the limit is the jobs' own (no operator's row)."""
    return KeyFlow(
        name,
        max_running=None if own else limit,
        limit=limit,
        running=running,
        waiting=waiting,
        waiting_at_least=at_least,
        set_at=None if own else NOW,
    )


def test_states_limits_and_lower_bounds() -> None:
    rows = [
        key("full", 3, 3, 5),
        key("held", 0, 0, 2, at_least=True),
        key("own", 1, 2, own=True),
        key("free", 0, None, own=True),
    ]
    header, body, right = keys_cells(rows)
    assert header == ["KEY", "RUNNING", "LIMIT", "WAITING", "STATE"]
    assert body == [
        ["full", "3", "3", "5", "full"],
        ["held", "0", "0", "\N{GREATER-THAN OR EQUAL TO} 2", "held"],
        ["own", "1", "2 (job)", "0", ""],
        ["free", "0", "-", "0", ""],
    ]
    assert right == {1, 2, 3}


def test_long_names_are_cut_with_an_ellipsis() -> None:
    assert clip("x" * 32) == "x" * 32
    assert clip("x" * 40) == "x" * 31 + "\N{HORIZONTAL ELLIPSIS}"
    (row,) = partitions_cells([PartitionFlow("q" * 30, "p" * 50, 7, 1, True)])[1]
    assert row == [
        "q" * 23 + "\N{HORIZONTAL ELLIPSIS}",
        "p" * 31 + "\N{HORIZONTAL ELLIPSIS}",
        "\N{GREATER-THAN OR EQUAL TO} 7",
        "1",
    ]


def test_stats_prints_no_section_without_rows() -> None:
    assert flow_lines([], []) == []
    lines = flow_lines([key("k", 1, 2)], [])
    assert lines[:2] == ["", "Concurrency keys (busiest first)"]


def test_top_columns_match_the_tables_and_fit_80_columns() -> None:
    assert list(KEY_COLUMNS) == keys_cells([])[0]
    assert list(PARTITION_COLUMNS) == partitions_cells([])[0]
    frame = top_frame(
        [queue_stats("etl", queued=9)],
        [],
        "queue_engine",
        NOW,
        width=80,
        keys=[key("k" * 200, 3, 3, 10_000_000, at_least=True)],
        partitions=[PartitionFlow("a-long-queue-name-" * 3, "t" * 200, 10_000_000, 5, True)],
    )
    assert max(len(line) for line in frame.splitlines()) <= 80
    assert "full" in frame and "\N{GREATER-THAN OR EQUAL TO} 10000000" in frame
