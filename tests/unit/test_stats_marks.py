"""Figures above ``QUEUE_ENGINE_STATS_EXACT_CAP``: the backlog split and how they are shown.

:func:`stats.split_backlog` turns counts that stopped at the cap into an
estimate or a lower bound; the renderers mark such figures (``~1.0M``,
``≥ 10,001``) and leave exact ones as they were. Pure functions, no database.
"""

from __future__ import annotations

from support.stats import queue_stats as queue

from queue_engine.cli import render
from queue_engine.operator import stats


def test_exact_counts_pass_through() -> None:
    assert stats.split_backlog(5, 7, queued_capped=False, delayed_capped=False, estimate=9e9) == (
        5,
        7,
        {},
    )


def test_one_capped_count_is_the_estimate_minus_the_exact_one() -> None:
    got = stats.split_backlog(10_001, 40, queued_capped=True, delayed_capped=False, estimate=1e6)
    assert got == (1_000_000 - 40, 40, {"queued": "estimate"})
    got = stats.split_backlog(3, 10_001, queued_capped=False, delayed_capped=True, estimate=50_003)
    assert got == (3, 50_000, {"delayed": "estimate"})


def test_a_stale_or_missing_estimate_leaves_a_lower_bound() -> None:
    # Statistics older than the backlog: the planner guesses fewer than were counted.
    got = stats.split_backlog(10_001, 0, queued_capped=True, delayed_capped=False, estimate=500)
    assert got == (10_001, 0, {"queued": "at_least"})
    got = stats.split_backlog(10_001, 0, queued_capped=True, delayed_capped=False, estimate=None)
    assert got == (10_001, 0, {"queued": "at_least"})


def test_both_capped_counts_are_lower_bounds() -> None:
    got = stats.split_backlog(101, 101, queued_capped=True, delayed_capped=True, estimate=1e6)
    assert got == (101, 101, {"queued": "at_least", "delayed": "at_least"})


def test_cells_mark_estimates_and_lower_bounds() -> None:
    q = queue(queued=1_034_567, delayed=10_001, estimated=("queued",), at_least=("delayed",))
    assert render.count_cell(q, "queued") == "~1.0M"
    assert render.count_cell(q, "delayed") == "\N{GREATER-THAN OR EQUAL TO} 10,001"
    assert render.count_cell(queue(queued=12), "queued") == "12"
    assert render.compact_count(25_400) == "25k"
    assert render.compact_count(9_876) == "9876"


def test_the_table_says_when_a_figure_is_not_exact() -> None:
    exact = render.stats_lines([queue(queued=3)])
    assert not any("estimate" in line for line in exact)
    marked = render.stats_lines(
        [queue(queued=2_000_000, out_15m=900, estimated=("queued", "out_15m"))]
    )
    assert "~2.0M" in marked[1] and "~0|60" in marked[1]
    assert "QUEUE_ENGINE_STATS_EXACT_CAP" in marked[-1]


def test_json_names_the_estimated_figures() -> None:
    q = queue(queued=2_000_000, estimated=("queued",), at_least=("in_15m",))
    out = q.to_dict()
    assert out["estimated"] == ["queued"] and out["at_least"] == ["in_15m"]
    doc = render.stats_document([q], 500)
    assert doc["exact_cap"] == 500 and "estimated" in doc["definitions"]


def test_the_least_exact_figure_sets_the_mark() -> None:
    q = queue(estimated=("in_1m",), at_least=("in_15m", "queued"))
    assert q.mark("in_1m", "in_15m") == "~"  # an estimate wins over a lower bound
    assert q.mark("queued") == "\N{GREATER-THAN OR EQUAL TO} "
    assert q.mark("running", "out_1m") == ""


def test_an_oldest_age_past_the_cap_is_shown_as_a_lower_bound() -> None:
    """A partitioned read that stopped at the cap may have left an older job unread."""
    exact, bound = (
        queue(oldest_queued_s=90.0),
        queue(oldest_queued_s=90.0, at_least=("oldest_queued_s",)),
    )
    assert render.stats_lines([exact])[1] != render.stats_lines([bound])[1]
    assert (
        "\N{GREATER-THAN OR EQUAL TO} " + stats.format_duration(90.0)
        in render.stats_lines([bound])[1]
    )
