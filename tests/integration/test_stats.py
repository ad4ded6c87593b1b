"""Contract of the views (``queue_engine.operator.stats``: stats, workers, show).

A known workload is written with direct SQL, every timestamp relative to one
pinned instant ``T`` that is also passed as the views' ``now``, so every figure
is checked exactly: queued/delayed/running, finished per status in the last
hour, throughput in/out over 1 and 15 minutes, wait and run percentiles
(percentile_cont), live/parked/dead workers, and the replicas suggestion.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from queue_engine.operator import stats

SCHEMA = "queue_engine"


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def insert_job(
    conn: psycopg.Connection[Any],
    *,
    queue: str = "a",
    status: str = "queued",
    created_at: datetime,
    available_at: datetime | None = None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
    duration_ms: int | None = None,
    task: str = "t.work",
) -> int:
    """Insert one job row as-is (the transition guard only watches UPDATEs)."""
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, created_at, available_at, "
        "started_at, finished_at, duration_ms, attempt, claimed_by) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            queue,
            task,
            status,
            created_at,
            available_at or created_at,
            started_at,
            finished_at,
            duration_ms,
            0 if started_at is None else 1,
            "w-x" if status == "running" else None,
        ),
    ).fetchone()
    assert row is not None
    return int(row[0])


def insert_worker(
    conn: psycopg.Connection[Any],
    wid: str,
    *,
    heartbeat_at: datetime,
    queue: str | None = "a",
    role: str = "worker",
    state: str = "idle",
    stopped_at: datetime | None = None,
    flagged_dead_at: datetime | None = None,
    current_job_id: int | None = None,
) -> None:
    conn.execute(
        "INSERT INTO queue_engine.workers (id, role, queue, host, pid, state, heartbeat_at, "
        "stopped_at, flagged_dead_at, current_job_id, rss_bytes, cpu_percent) "
        "VALUES (%s, %s, %s, 'host-1', 4242, %s, %s, %s, %s, %s, 104857600, 12.5)",
        (wid, role, queue, state, heartbeat_at, stopped_at, flagged_dead_at, current_job_id),
    )


@pytest.fixture
def T(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def known_workload(conn: psycopg.Connection[Any], T: datetime) -> None:
    # 3 claimable now (oldest available 30 s ago), 2 delayed (created 5 s ago).
    for age in (10, 20, 30):
        insert_job(conn, created_at=T - s(age))
    for _ in range(2):
        insert_job(conn, created_at=T - s(5), available_at=T + s(60))
    # 1 running, waited 20 s.
    insert_job(conn, status="running", created_at=T - s(120), started_at=T - s(100))
    # 4 succeeded 5 min ago: waited 1..4 s, ran 1..4 s.
    for i in (1, 2, 3, 4):
        insert_job(
            conn,
            status="succeeded",
            created_at=T - s(600),
            started_at=T - s(600 - i),
            finished_at=T - s(300),
            duration_ms=1000 * i,
        )
    # 1 succeeded 30 s ago: waited 10 s, ran 10 s.
    insert_job(
        conn,
        status="succeeded",
        created_at=T - s(50),
        started_at=T - s(40),
        finished_at=T - s(30),
        duration_ms=10_000,
    )
    # 2 failed 30 min ago, 1 lost 20 min ago (started long before the 15 min window).
    for _ in range(2):
        insert_job(
            conn,
            status="failed",
            created_at=T - s(2400),
            started_at=T - s(1860),
            finished_at=T - s(1800),
            duration_ms=500,
        )
    insert_job(
        conn,
        status="lost",
        created_at=T - s(3000),
        started_at=T - s(1500),
        finished_at=T - s(1200),
        duration_ms=300_000,
    )
    # 1 canceled while queued, 10 s ago; 1 succeeded 2 h ago (outside every window).
    insert_job(conn, status="canceled", created_at=T - s(20), finished_at=T - s(10))
    insert_job(
        conn,
        status="succeeded",
        created_at=T - s(7300),
        started_at=T - s(7250),
        finished_at=T - s(7200),
        duration_ms=50_000,
    )
    # Another queue with a job only.
    insert_job(conn, queue="b", created_at=T - s(3))
    # Workers of queue a: live idle, live parked, stale (dead), flagged, stopped.
    insert_worker(conn, "w-live", heartbeat_at=T - s(5), state="busy")
    insert_worker(conn, "w-parked", heartbeat_at=T - s(1), state="parked")
    insert_worker(conn, "w-stale", heartbeat_at=T - s(60))
    insert_worker(conn, "w-flagged", heartbeat_at=T - s(40), flagged_dead_at=T - s(5))
    insert_worker(
        conn, "w-stopped", heartbeat_at=T - s(100), stopped_at=T - s(100), state="stopped"
    )
    # A worker of a queue without jobs, and an orchestrator (no queue).
    insert_worker(conn, "w-c", heartbeat_at=T - s(2), queue="c")
    insert_worker(conn, "orch-1", heartbeat_at=T - s(2), queue=None, role="orchestrator")


def test_stats_figures_on_a_known_workload(conn, T) -> None:
    known_workload(conn, T)
    rows = {q.queue: q for q in stats.queue_stats(conn, SCHEMA, now=T, dead_after=30)}
    assert sorted(rows) == ["a", "b", "c"]
    a = rows["a"]
    assert (a.queued, a.delayed, a.running) == (3, 2, 1)
    assert (a.succeeded_1h, a.failed_1h, a.lost_1h, a.canceled_1h) == (5, 2, 1, 1)
    assert (a.in_1m, a.in_15m, a.out_1m, a.out_15m) == (7, 12, 2, 6)
    assert a.oldest_queued_s == pytest.approx(30.0)
    # Wait samples [1, 2, 3, 4, 10, 20]: percentile_cont interpolates.
    assert a.wait_samples == 6
    assert a.wait_p50_s == pytest.approx(3.5)
    assert a.wait_p95_s == pytest.approx(17.5)
    # Run samples [1, 2, 3, 4, 10] (succeeded/failed in the last 15 min).
    assert a.run_samples == 5
    assert a.run_p50_s == pytest.approx(3.0)
    assert a.run_p95_s == pytest.approx(8.8)
    assert a.run_mean_s == pytest.approx(4.0)
    assert (a.workers_live, a.workers_parked, a.workers_dead) == (2, 1, 2)
    # 12 arrivals / 900 s x 4 s mean / 0.7 = 0.076 -> 1 (and at least 1 with work waiting).
    assert a.replicas_suggested == 1
    doc = a.to_dict()
    assert doc["replicas"]["suggested"] == 1
    assert doc["replicas"]["arrival_rate_per_s"] == pytest.approx(12 / 900)
    assert "ceil(" in doc["replicas"]["formula"]
    assert doc["throughput_per_s"]["out_1m"] == pytest.approx(2 / 60)

    b = rows["b"]
    assert (b.queued, b.in_1m, b.workers_live, b.replicas_suggested) == (1, 1, 0, 1)
    assert b.wait_p50_s is None and b.run_mean_s is None
    c = rows["c"]
    assert (c.queued, c.running, c.workers_live, c.replicas_suggested) == (0, 0, 1, 0)


def test_stats_for_one_queue_and_the_replicas_suggestion_under_load(conn, T) -> None:
    # 900 arrivals in 15 min (1/s), each ran 3.5 s: 1 x 3.5 / 0.7 = 5 workers.
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, created_at, available_at, "
        "started_at, finished_at, duration_ms, attempt) "
        "SELECT 'load', 't', 'succeeded', %(T)s - make_interval(secs => g), "
        "%(T)s - make_interval(secs => g), %(T)s - make_interval(secs => g), "
        "%(T)s - make_interval(secs => g) + interval '3.5 seconds', 3500, 1 "
        "FROM generate_series(0, 899) g",
        {"T": T},
    )
    insert_job(conn, queue="other", created_at=T - s(1))
    rows = stats.queue_stats(conn, SCHEMA, queue="load", now=T, dead_after=30)
    assert [q.queue for q in rows] == ["load"]
    (q,) = rows
    assert q.in_15m == 900 and q.run_mean_s == pytest.approx(3.5)
    assert q.replicas_suggested == 5


def test_workers_view_lists_every_row_with_liveness(conn, T) -> None:
    known_workload(conn, T)
    rows = {w.id: w for w in stats.workers(conn, SCHEMA, now=T, dead_after=30)}
    assert set(rows) == {
        "w-live",
        "w-parked",
        "w-stale",
        "w-flagged",
        "w-stopped",
        "w-c",
        "orch-1",
    }
    assert rows["w-live"].liveness == "live"
    assert rows["w-live"].heartbeat_age_s == pytest.approx(5.0)
    assert rows["w-parked"].liveness == "live"
    assert rows["w-stale"].liveness == "dead"
    assert rows["w-flagged"].liveness == "dead"
    assert rows["w-flagged"].flagged_dead_at is not None
    assert rows["w-stopped"].liveness == "stopped"
    assert rows["orch-1"].role == "orchestrator" and rows["orch-1"].queue is None
    w = rows["w-live"]
    assert (w.host, w.pid, w.rss_bytes, w.cpu_percent, w.state) == (
        "host-1",
        4242,
        104857600,
        pytest.approx(12.5),
        "busy",
    )
    assert w.to_dict()["heartbeat_at"].startswith(str(T.year))


def test_show_timeline_is_the_jobs_events_in_order(conn, client) -> None:
    job = client.enqueue("t.show", queue="a")
    conn.execute(
        "INSERT INTO queue_engine.job_events (job_id, kind, from_status, to_status, attempt, "
        "worker_id, message) VALUES "
        "(%(id)s, 'claimed', 'queued', 'running', 1, 'w-1', NULL), "
        "(%(id)s, 'retry', 'running', 'queued', 1, 'w-1', 'boom'), "
        "(%(id)s, 'claimed', 'queued', 'running', 2, 'w-2', NULL), "
        "(%(id)s + 1000, 'claimed', 'queued', 'running', 1, 'w-3', 'other job')",
        {"id": job.id},
    )
    events = stats.job_events(conn, SCHEMA, job.id)
    assert [(e.kind, e.attempt, e.worker_id, e.message) for e in events] == [
        ("claimed", 1, "w-1", None),
        ("retry", 1, "w-1", "boom"),
        ("claimed", 2, "w-2", None),
    ]
    assert [e.id for e in events] == sorted(e.id for e in events)
    assert stats.job_events(conn, SCHEMA, 999_999) == []


def test_stats_show_scale_and_rate_limits_and_workers_their_warm_key_and_stop(conn, T) -> None:
    known_workload(conn, T)
    conn.execute(
        "INSERT INTO queue_engine.queues (name, scale_limit, rate_limit, rate_burst) VALUES "
        "('a', 4, NULL, 1), ('limited', NULL, 2.5, 3), ('defaults', NULL, NULL, 7)"
    )
    conn.execute(
        "UPDATE queue_engine.workers SET warm_key = 'model-x', stop_requested_at = %s "
        "WHERE id = 'w-live'",
        (T - s(1),),
    )
    rows = {q.queue: q for q in stats.queue_stats(conn, SCHEMA, now=T, dead_after=30)}
    # A queue with a limit in force is listed without jobs or workers; a row at
    # its defaults (no pause, no limit) is not.
    assert sorted(rows) == ["a", "b", "c", "limited"]
    assert (rows["a"].scale_limit, rows["a"].rate_limit, rows["a"].rate_burst) == (4, None, None)
    assert (rows["limited"].rate_limit, rows["limited"].rate_burst) == (2.5, 3)
    assert rows["limited"].queued == 0 and not rows["limited"].paused
    assert (rows["b"].scale_limit, rows["b"].rate_limit) == (None, None)
    # Parked workers are those whose state says so, and count as live too.
    assert (rows["a"].workers_live, rows["a"].workers_parked) == (2, 1)
    doc = rows["limited"].to_dict()
    assert (doc["scale_limit"], doc["rate_limit"], doc["rate_burst"]) == (None, 2.5, 3)
    (only,) = stats.queue_stats(conn, SCHEMA, queue="limited", now=T, dead_after=30)
    assert only.rate_limit == 2.5

    workers = {w.id: w for w in stats.workers(conn, SCHEMA, now=T, dead_after=30)}
    live = workers["w-live"]
    assert live.warm_key == "model-x" and live.stop_requested
    assert live.to_dict()["stop_requested"] is True
    assert not workers["w-parked"].stop_requested and workers["w-parked"].warm_key is None
