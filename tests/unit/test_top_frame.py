"""``queue-ctl top`` fits its terminal: no line wider than it, the key columns kept.

At 80 columns the frame used to show the left half of each table (the lines
were cut at the width). :func:`queue_engine.cli.top.top_frame` now shortens
headers and drops the least important columns first; these tests draw a
realistic fleet at 80, 120 and 200 columns. Pure functions, no database.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.stats import queue_stats, worker_row

from queue_engine.cli import render, top

NOW = datetime(2026, 11, 28, 16, 8, 53, tzinfo=UTC)

QUEUES = [
    queue_stats(
        "load.cbr",
        queued=1_234,
        delayed=56,
        running=4,
        succeeded_1h=9_876,
        failed_1h=12,
        lost_1h=1,
        in_1m=240,
        in_15m=3_300,
        out_1m=236,
        out_15m=3_290,
        oldest_queued_s=84.0,
        wait_p50_s=0.8,
        wait_p95_s=12.5,
        run_p50_s=1.2,
        run_p95_s=7.9,
        workers_live=4,
        workers_parked=1,
        workers_dead=0,
        scale_limit=6,
        rate_limit=50.0,
        rate_burst=10,
    ),
    queue_stats("reports.monthly", queued=3, running=1, paused=True, workers_live=1),
]

WORKERS = [
    worker_row(
        "etl-host-01:31337:9f00aa",
        host="etl-host-01",
        pid=31337,
        queue="load.cbr",
        state="running",
        current_job_id=1_234_567,
        warm_key="model-large",
        telemetry={"load": [1.25, 1.0, 0.9]},
    ),
    worker_row(
        "orchestrator@etl-host-01:4242:0c0ffe",
        role="orchestrator",
        host="etl-host-01",
        queue=None,
        state="leader",
    ),
]

#: What a frame must show at any width: which queue, how deep, what runs, and who works.
KEY_QUEUE_HEADERS = ("QUEUE", "QUEUED", "RUNNING")
KEY_WORKER_HEADERS = ("ID", "QUEUE", "STATE")


def _frame(width: int) -> list[str]:
    return top.top_frame(QUEUES, WORKERS, "queue_engine", NOW, width=width).splitlines()


@pytest.mark.parametrize("width", [80, 120, 200])
def test_no_line_is_wider_than_the_terminal(width: int) -> None:
    lines = _frame(width)
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[0]!r}"


@pytest.mark.parametrize("width", [80, 120, 200])
def test_key_columns_and_every_row_are_kept(width: int) -> None:
    lines = _frame(width)
    queue_header = next(line for line in lines if line.startswith("QUEUE "))
    worker_header = next(line for line in lines if line.startswith("ID "))
    assert all(h in queue_header.split() for h in KEY_QUEUE_HEADERS), queue_header
    assert all(h in worker_header.split() for h in KEY_WORKER_HEADERS), worker_header
    text = "\n".join(lines)
    for name in ("load.cbr", "reports.monthly", "etl-host-01:31337:9f00aa", "1234567"):
        assert name in text, f"{name} missing at width {width}"
    # the figures of the key columns, whole: not cut mid-cell
    row = next(line for line in lines if line.startswith("load.cbr "))
    assert row.split()[:2] == ["load.cbr", "1234"]


def test_at_200_columns_the_frame_is_the_full_tables() -> None:
    """Wide enough: the same tables as ``queue-ctl stats`` and ``workers``, nothing hidden."""
    lines = _frame(200)
    assert render.stats_lines(QUEUES)[0] in lines
    assert all(line in lines for line in render.workers_lines(WORKERS))
    assert lines[1] == ""  # no line about hidden columns


def test_at_80_columns_failures_pauses_workers_and_liveness_stay() -> None:
    lines = _frame(80)
    queue_header = next(line for line in lines if line.startswith("QUEUE ")).split()
    worker_header = next(line for line in lines if line.startswith("ID ")).split()
    assert "FAIL/1h" in queue_header and "l/p/d" in queue_header  # short headers
    assert "PAUSED" in queue_header
    assert "LIVENESS" in worker_header and "JOB" in worker_header
    assert "HOST" not in worker_header and "PID" not in worker_header  # in the id already
    assert lines[0].startswith("queue-engine top  2026-11-28 16:08:53 UTC")
    assert "q to quit" in lines[0]
    assert lines[1].startswith("19 columns hidden at this width")


def test_columns_go_highest_rank_first_and_rank_0_never() -> None:
    header, rows, right = render.stats_cells(QUEUES)
    full = top.fit_table(header, rows, right, top.QUEUE_COLUMNS, 500)
    assert full.hidden == []
    narrow = top.fit_table(header, rows, right, top.QUEUE_COLUMNS, 60)
    ranks = {h: top.QUEUE_COLUMNS[h].rank for h in header}
    kept = [h for h in header if h not in narrow.hidden]
    assert max(ranks[h] for h in kept) <= min(ranks[h] for h in narrow.hidden)
    tiny = top.fit_table(header, rows, right, top.QUEUE_COLUMNS, 10)
    assert [h for h in header if h not in tiny.hidden] == [h for h in header if ranks[h] == 0]
    assert all(len(line) <= 10 for line in tiny.lines)  # the last resort: cut


def test_every_column_of_the_tables_has_a_rank() -> None:
    """A column added to ``stats`` or ``workers`` needs its place in ``top`` (top.py's tables)."""
    assert list(top.QUEUE_COLUMNS) == render.stats_cells([])[0]
    assert list(top.WORKER_COLUMNS) == render.workers_cells([])[0]


def test_the_estimate_note_is_wrapped_to_the_width() -> None:
    capped = [queue_stats("big", queued=2_000_000, estimated=("queued",))]
    lines = top.top_frame(capped, [], "queue_engine", NOW, width=80).splitlines()
    assert any("QUEUE_ENGINE_STATS_EXACT_CAP" in line for line in lines)
    assert max(len(line) for line in lines) <= 80
