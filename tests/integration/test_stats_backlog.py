"""`queue-ctl stats` reads a backlog from the claim index, never from the table's rows.

With a million queued jobs the stats statement used to read every queued
row's heap tuple (a sequential or bitmap scan of the table, for created_at),
which took seconds (bench/scale.py, bench/runs/2026-11-27-log.md). Now queued/delayed and
the oldest due job come from an index-only pass over ``jobs_claimable_idx``,
and heap tuples are read only for queued jobs due in the last 15 minutes (the
``in`` throughput). The test counts the pages the statement touches: far fewer
than the table's heap pages, whatever plan the server picks.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.operator import stats

SCHEMA = "queue_engine"
BACKLOG = 10_000


def fill_backlog(conn: psycopg.Connection[Any], now: datetime) -> None:
    """BACKLOG queued jobs of queue a, due an hour ago, among 4x as many finished two days ago.

    One row in five is queued, so queued rows are spread over every heap page
    (as a backlog among history is), and the planner sees a table that is
    mostly history. Args are realistic, so the rows are wide.
    """
    conn.execute("ALTER TABLE queue_engine.jobs SET (autovacuum_enabled = false)")
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, args, status, created_at, available_at, "
        "started_at, finished_at, attempt) "
        "SELECT 'a', 't.work', jsonb_build_object('payload', repeat('x', 200), 'n', g), "
        "CASE WHEN g %% 5 = 0 THEN 'queued' ELSE 'succeeded' END, "
        "%(at)s::timestamptz, %(at)s::timestamptz, "
        "CASE WHEN g %% 5 = 0 THEN NULL ELSE %(old)s::timestamptz END, "
        "CASE WHEN g %% 5 = 0 THEN NULL ELSE %(old)s::timestamptz END, "
        "CASE WHEN g %% 5 = 0 THEN 0 ELSE 1 END "
        "FROM generate_series(1, %(n)s) g",
        {"at": now - timedelta(hours=1), "old": now - timedelta(days=2), "n": BACKLOG * 5},
    )
    # Two delayed jobs (due in 10 minutes) and one just enqueued: their heap rows are
    # read (in_15m).
    for created, available in ((60, -600), (60, -600), (5, 5)):
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, created_at, available_at) "
            "VALUES ('a', 't.work', %s, %s)",
            (now - timedelta(seconds=created), now - timedelta(seconds=available)),
        )
    # As autovacuum leaves a settled backlog: fresh statistics, then the visibility
    # map set. Done by hand, with autovacuum off for this table: an autoanalyze
    # started by the insert can finish after our VACUUM and record the page
    # counts it saw before it (no page all-visible), which changes the plan.
    # VACUUM is repeated until the map is set: right after the previous test's
    # database was dropped, a first VACUUM was seen to set no page all-visible.
    conn.execute("ANALYZE queue_engine.jobs")
    for _ in range(100):
        conn.execute("VACUUM queue_engine.jobs")
        row = conn.execute(
            "SELECT relallvisible::float8 / greatest(relpages, 1) FROM pg_class"
            " WHERE oid = 'queue_engine.jobs'::regclass"
        ).fetchone()
        if row is not None and row[0] > 0.9:
            break
        time.sleep(0.1)


def pages_touched(conn: psycopg.Connection[Any], now: datetime) -> int:
    """Shared buffers (hit + read) of one run of the stats statement."""
    row = conn.execute(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries.query("stats_queues", SCHEMA),
        {"now": now, "queue": None, "dead_after_s": 30.0, "cap": BACKLOG * 2},
    ).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def heap_pages(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT pg_relation_size('queue_engine.jobs') / current_setting('block_size')::int"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_stats_counts_a_backlog_from_the_index_without_reading_its_rows(conn) -> None:
    now = datetime.now().astimezone()
    fill_backlog(conn, now)
    (a,) = stats.queue_stats(conn, SCHEMA, now=now, dead_after=30, cap=BACKLOG * 2)
    assert (a.queued, a.delayed) == (BACKLOG + 1, 2)
    assert a.oldest_queued_s is not None and abs(a.oldest_queued_s - 3600) < 1
    assert (a.in_1m, a.in_15m) == (1, 3)  # created 5 s, 60 s and 60 s ago
    pages_touched(conn, now)  # warm the catalog caches: count the statement's own reads only
    touched = pages_touched(conn, now)
    heap = heap_pages(conn)
    assert heap > 500, heap  # rows wide enough that the heap dwarfs the index
    assert touched < heap / 4, (touched, heap)
