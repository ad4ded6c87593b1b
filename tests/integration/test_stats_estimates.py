"""`queue-ctl stats` stays bounded at any table size: exact below a cap, marked above it.

Every read of ``sql/stats_queues.sql`` stops after ``cap`` + 1 index entries
or rows (``QUEUE_ENGINE_STATS_EXACT_CAP``; here a small ``cap`` so a few
hundred rows cross it). The tests check the switch both ways on the same
data: with a cap above the data every figure is exact and nothing is marked;
with a cap below it the figures that stopped at the cap are named in
``estimated`` (the backlog from the planner's statistics, finished counts
extrapolated from the span read) or ``at_least`` (a lower bound), and the
figures that did not are still exact. The clock is pinned (``now``), so the
windows' boundaries are checked to the row. Last, a plan check: with a
small cap the statement touches a bounded number of pages however many rows
the table holds.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.operator import stats

SCHEMA = "queue_engine"
T = datetime.fromisoformat("2026-06-01T12:00:00+00:00")


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def insert_queued(
    conn: psycopg.Connection[Any],
    queue: str,
    n: int,
    *,
    due_from_s: float,
    step_s: float,
    priority: int = 0,
    created_ago_s: float = 3600,
) -> None:
    """``n`` queued jobs due at T + due_from_s + i * step_s (i = 0..n-1)."""
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, priority, created_at, available_at) "
        "SELECT %(q)s, 't.work', 'queued', %(p)s, %(created)s::timestamptz, "
        "%(t)s::timestamptz + make_interval(secs => %(from)s + g * %(step)s) "
        "FROM generate_series(0, %(n)s - 1) g",
        {
            "q": queue,
            "p": priority,
            "t": T,
            "from": due_from_s,
            "step": step_s,
            "n": n,
            "created": T - s(created_ago_s),
        },
    )


def insert_finished(
    conn: psycopg.Connection[Any], queue: str, n: int, *, every_s: float, status: str = "succeeded"
) -> None:
    """``n`` jobs finished at T - i * every_s (i = 0..n-1), each run 2 s, waited 1 s."""
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, created_at, available_at, "
        "started_at, finished_at, duration_ms, attempt) "
        "SELECT %(q)s, 't.work', %(st)s, f - interval '3 seconds', f - interval '3 seconds', "
        "f - interval '2 seconds', f, 2000, 1 "
        "FROM (SELECT %(t)s::timestamptz - make_interval(secs => g * %(every)s) AS f "
        "      FROM generate_series(0, %(n)s - 1) g) x",
        {"q": queue, "st": status, "t": T, "every": every_s, "n": n},
    )


def figures(conn: psycopg.Connection[Any], cap: int, queue: str | None = None) -> dict[str, Any]:
    return {
        q.queue: q
        for q in stats.queue_stats(conn, SCHEMA, now=T, dead_after=30, cap=cap, queue=queue)
    }


def test_backlog_below_the_cap_is_exact_across_priorities(conn) -> None:
    # 120 due and 30 delayed in priority 0, 50 due in priority 5, 7 delayed in priority 200.
    insert_queued(conn, "a", 150, due_from_s=-119 * 60, step_s=60)  # due T-119m .. T+30m
    insert_queued(conn, "a", 50, due_from_s=-500, step_s=1, priority=5)
    insert_queued(conn, "a", 7, due_from_s=60, step_s=1, priority=200)
    insert_queued(conn, "b", 3, due_from_s=-10, step_s=1)
    a = figures(conn, cap=1000)["a"]
    assert (a.queued, a.delayed) == (120 + 50, 30 + 7)
    assert a.oldest_queued_s == 119 * 60
    assert a.estimated == () and a.at_least == ()
    # The cap is per (queue, priority) range and figure: 120 < 121 keeps it exact.
    a = figures(conn, cap=120)["a"]
    assert (a.queued, a.delayed) == (170, 37)
    assert a.estimated == () and a.at_least == ()
    b = figures(conn, cap=120, queue="b")["b"]
    assert (b.queued, b.delayed) == (3, 0)


def test_backlog_above_the_cap_is_estimated_from_statistics_and_marked(conn) -> None:
    insert_queued(conn, "big", 3000, due_from_s=-3000, step_s=0.5)  # all due
    insert_queued(conn, "big", 20, due_from_s=600, step_s=1)  # delayed
    insert_finished(conn, "big", 2000, every_s=3600)  # history of the same queue
    conn.execute("ANALYZE queue_engine.jobs")
    exact = figures(conn, cap=10_000)["big"]
    assert (exact.queued, exact.delayed) == (3000, 20)
    assert "queued" not in exact.estimated
    # oldest_queued_s stays exact above the cap: the first entry of each range.
    assert exact.oldest_queued_s == 3000

    big = figures(conn, cap=100)["big"]
    assert "queued" in big.estimated
    assert big.delayed == 20 and big.exactness("delayed") == "exact"
    # The planner's estimate of the backlog (3,020 rows, in a 5,020-row table with
    # the same queue's history: the (queue, status) statistics), minus the 20 delayed.
    assert 2000 < big.queued < 4500, big.queued
    assert big.oldest_queued_s == 3000
    assert big.to_dict()["estimated"] == list(big.estimated)


def test_both_backlog_counts_above_the_cap_are_lower_bounds(conn) -> None:
    insert_queued(conn, "c", 300, due_from_s=-300, step_s=1)
    insert_queued(conn, "c", 300, due_from_s=60, step_s=1)
    c = figures(conn, cap=100)["c"]
    assert (c.queued, c.delayed) == (101, 101)
    assert c.exactness("queued") == c.exactness("delayed") == "at_least"


def test_finished_counts_above_the_cap_are_extrapolated_from_the_span_read(conn) -> None:
    # One job finished every 6 s over the last 20 minutes: 10 a minute, 150 in 15 min.
    insert_finished(conn, "f", 200, every_s=6)
    insert_finished(conn, "f", 5, every_s=60, status="failed")  # at T, T-1m, ..., T-4m
    exact = figures(conn, cap=1000)["f"]
    assert (exact.out_1m, exact.out_15m) == (10 + 1, 150 + 5)
    assert (exact.succeeded_1h, exact.failed_1h) == (200, 5)
    assert exact.run_p50_s == 2.0 and exact.wait_p50_s == 1.0
    assert exact.estimated == () and exact.at_least == ()

    # cap 60: the newest 61 rows reach back about 5 minutes; the last minute is
    # covered (exact), the 15-minute and 1-hour windows are extrapolated.
    f = figures(conn, cap=60)["f"]
    assert f.out_1m == 11 and f.exactness("out_1m") == "exact"
    assert {"out_15m", "succeeded_1h", "failed_1h", "run_p50_s", "wait_p95_s"} <= set(f.estimated)
    assert f.exactness("in_15m") == "at_least"
    # 60 rows in ~5.3 minutes, scaled to 15 minutes: about 170 (true: 155).
    assert 120 < f.out_15m < 220, f.out_15m
    assert f.run_p50_s == 2.0  # percentiles of the rows read


def test_windows_follow_the_pinned_clock_to_the_row(conn) -> None:
    # Finished exactly 60 s before T is outside the 1-minute window (> T - 1m);
    # 59.9 s before is inside; 1 s after T is not counted in any window yet.
    for ago in (60.0, 59.9, -1.0):
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, status, created_at, available_at, "
            "started_at, finished_at, duration_ms, attempt) VALUES ('w', 't', 'succeeded', "
            "%(f)s, %(f)s, %(f)s, %(f)s, 0, 1)",
            {"f": T - s(ago)},
        )
    w = figures(conn, cap=1)["w"]  # cap 1: the read stops at the row of T + 1 s
    w_exact = figures(conn, cap=100)["w"]
    assert w_exact.out_1m == 1 and w_exact.out_15m == 2
    assert w_exact.estimated == ()
    assert "out_15m" in w.estimated


def test_the_statement_reads_a_bounded_number_of_pages(conn) -> None:
    """With a small cap, pages touched stay far below the table's, whatever it holds."""
    conn.execute("ALTER TABLE queue_engine.jobs SET (autovacuum_enabled = false)")
    insert_queued(conn, "p", 20_000, due_from_s=-600, step_s=0.03, created_ago_s=300)
    conn.execute(
        "UPDATE queue_engine.jobs SET args = jsonb_build_object('payload', repeat('x', 300))"
    )
    insert_finished(conn, "p", 20_000, every_s=0.1)
    conn.execute("UPDATE queue_engine.jobs SET error = repeat('y', 300) WHERE status <> 'queued'")
    conn.execute("VACUUM (ANALYZE) queue_engine.jobs")
    heap = conn.execute(
        "SELECT pg_relation_size('queue_engine.jobs') / current_setting('block_size')::int"
    ).fetchone()
    assert heap is not None and heap[0] > 1000, heap

    def touched(cap: int) -> int:
        params = {"now": T, "queue": None, "dead_after_s": 30.0, "cap": cap}
        sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries.query("stats_queues", SCHEMA)
        conn.execute(sql, params)  # warm the catalog caches
        row = conn.execute(sql, params).fetchone()
        assert row is not None
        plan = row[0][0]["Plan"]
        return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])

    small, large = touched(100), touched(100_000)
    assert small < heap[0] / 10, (small, heap[0])
    assert small < large / 5, (small, large)
    p = figures(conn, cap=100)["p"]
    assert "queued" in p.estimated and "out_15m" in p.estimated


def insert_partitioned(
    conn: psycopg.Connection[Any],
    queue: str,
    n: int,
    *,
    due_from_s: float,
    step_s: float,
    partitions: int,
    created_ago_s: float = 3600,
) -> None:
    """``n`` queued jobs over ``partitions`` partition keys, due as in :func:`insert_queued`.

    The row rules give each its fair turn (``fair_tag``), so they sit after the
    plain jobs of their range in ``jobs_claimable_idx``, ordered by turn.
    """
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, created_at, available_at, "
        "partition_key) "
        "SELECT %(q)s, 't.work', 'queued', %(created)s::timestamptz, "
        "%(t)s::timestamptz + make_interval(secs => %(from)s + g * %(step)s), "
        "'tenant-' || (g %% %(parts)s) "
        "FROM generate_series(0, %(n)s - 1) g",
        {
            "q": queue,
            "t": T,
            "from": due_from_s,
            "step": step_s,
            "n": n,
            "parts": partitions,
            "created": T - s(created_ago_s),
        },
    )


def pages_touched(conn: psycopg.Connection[Any], cap: int) -> int:
    """Shared buffers the statement touches (hit or read), warm catalog caches."""
    params = {"now": T, "queue": None, "dead_after_s": 30.0, "cap": cap}
    sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries.query("stats_queues", SCHEMA)
    conn.execute(sql, params)
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def test_partitioned_jobs_below_the_cap_are_counted_exactly_beside_plain_ones(conn) -> None:
    # Plain: 40 due (oldest T-98s), 10 delayed. Partitioned: 26 due, the oldest
    # (T-500s) older than every plain job, 10 delayed, 4 created in the last minute.
    insert_queued(conn, "m", 50, due_from_s=-98, step_s=2.5)  # T-98 .. T+24.5
    insert_partitioned(conn, "m", 36, due_from_s=-500, step_s=20, partitions=3)  # .. T+200
    insert_partitioned(conn, "m", 4, due_from_s=-30, step_s=1, partitions=2, created_ago_s=30)
    tagged = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE queue = 'm' AND fair_tag IS NOT NULL"
    ).fetchone()
    assert tagged == (40,)
    m = figures(conn, cap=1000)["m"]
    assert (m.queued, m.delayed) == (40 + 26 + 4, 10 + 10)
    assert m.oldest_queued_s == 500
    assert m.in_1m == 4 and m.in_15m == 4
    assert m.estimated == () and m.at_least == ()
    # At a cap the partitioned read holds exactly (40 < 41): the backlog is
    # still exact (only the plain `in` read, 50 in the window, stops at it).
    m = figures(conn, cap=40)["m"]
    assert (m.queued, m.delayed, m.oldest_queued_s) == (70, 20, 500)
    assert m.estimated == () and m.at_least == ("in_15m",)
    # Below: the partitioned read stops, and what it feeds is marked.
    m = figures(conn, cap=20)["m"]
    assert m.exactness("queued") == m.exactness("delayed") == "at_least"
    assert {"oldest_queued_s", "in_1m", "in_15m"} <= set(m.at_least)


def test_partitioned_backlogs_read_a_bounded_number_of_pages(conn) -> None:
    """Plain and partitioned queued jobs in one range: a small cap touches few pages."""
    conn.execute("ALTER TABLE queue_engine.jobs SET (autovacuum_enabled = false)")
    insert_queued(conn, "p", 12_000, due_from_s=-600, step_s=0.05, created_ago_s=300)
    insert_queued(conn, "p", 3_000, due_from_s=60, step_s=1)  # plain, delayed
    insert_partitioned(conn, "p", 8_000, due_from_s=-700, step_s=0.08, partitions=20)
    conn.execute(
        "UPDATE queue_engine.jobs SET args = jsonb_build_object('payload', repeat('x', 300))"
    )
    conn.execute("VACUUM (ANALYZE) queue_engine.jobs")
    heap = conn.execute(
        "SELECT pg_relation_size('queue_engine.jobs') / current_setting('block_size')::int"
    ).fetchone()
    assert heap is not None and heap[0] > 1000, heap
    small, large = pages_touched(conn, 100), pages_touched(conn, 100_000)
    assert small < heap[0] / 10, (small, heap[0])
    assert small < large / 5, (small, large)
    exact = figures(conn, cap=100_000)["p"]
    assert (exact.queued, exact.delayed) == (12_000 + 8_000, 3_000)
    p = figures(conn, cap=100)["p"]
    assert p.exactness("queued") == p.exactness("delayed") == "at_least"
    assert p.queued >= 101 and p.delayed >= 101
