"""Postgres restarts while workers drain a queue: nothing lost, nothing finished twice.

Three ``queue-claim-worker`` processes drain 2,000 short jobs; part-way the
test restarts the server (``pg_ctl restart -m fast``: every session is cut,
in-flight statements roll back), and later crashes it (``-m immediate``) and
keeps it down for two seconds before starting it again. Every worker must reconnect with backoff,
re-send the finishes it could not write (guarded, so a finish that did land
is simply not applied twice), and go on. Needs the embedded server (skipped
with ``QUEUE_ENGINE_TEST_DSN``, whose server the tests do not own).
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from support.workers import kill_all, spawn_worker, stop_process, wait_until

JOBS = 2000
WORKERS = 3


def count(dsn: str) -> int:
    """Succeeded jobs; -1 while the server cannot be reached."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM queue_engine.jobs WHERE status = 'succeeded'"
            ).fetchone()
    except psycopg.OperationalError:
        return -1  # the server is restarting
    return int(row[0]) if row else 0


def test_postgres_restart_while_draining_loses_and_doubles_nothing(
    dsn: str, pg_server, tmp_path: Path
) -> None:
    if pg_server.embedded is None:
        pytest.skip("restarts the server: needs the embedded Postgres, not QUEUE_ENGINE_TEST_DSN")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, args)"
            " SELECT 'wt', 'sleepy', jsonb_build_object('sleep', 0.002, 'i', i)"
            " FROM generate_series(1, %s) i",
            (JOBS,),
        )
    logs = [tmp_path / f"worker{i}.log" for i in range(WORKERS)]
    procs = [spawn_worker(dsn, log_file=log) for log in logs]
    try:
        started = time.monotonic()
        wait_until(lambda: count(dsn) >= JOBS // 4, timeout=60, what="a quarter drained")
        before = count(dsn)
        restart_at = time.monotonic()
        pg_server.embedded.restart()
        restart_s = time.monotonic() - restart_at
        wait_until(lambda: count(dsn) >= JOBS // 2, timeout=60, what="half drained")
        middle = count(dsn)
        errors = [log.read_text().count("worker.db_error") for log in logs]
        pg_server.embedded.stop(mode="immediate")  # a crash: no shutdown checkpoint
        down_at = time.monotonic()
        # Down until every worker has run into the outage and retried three times:
        # their finishes pile up and are retried with a growing backoff.
        wait_until(
            lambda: all(
                log.read_text().count("worker.db_error") >= n + 4
                for log, n in zip(logs, errors, strict=True)
            ),
            timeout=60,
            what="every worker to retry through the outage",
        )
        down_s = time.monotonic() - down_at
        pg_server.embedded.start()
        wait_until(lambda: count(dsn) == JOBS, timeout=90, interval=0.2, what="all succeeded")
        drained_s = time.monotonic() - started
        alive = [p.poll() is None for p in procs]
        print(
            f"\npostgres restart: {before}/{JOBS} done when restarted, pg_ctl restart took "
            f"{restart_s:.2f} s; {middle}/{JOBS} done when crashed and kept down {down_s:.1f} s; "
            f"all {JOBS} succeeded {drained_s:.1f} s after start; "
            f"workers alive: {alive}"
        )
        assert all(alive), "a worker died of the restart"
        codes = [stop_process(p) for p in procs]
    finally:
        kill_all(procs)
    assert codes == [0] * WORKERS
    with psycopg.connect(dsn, autocommit=True) as conn:
        twice = conn.execute(
            "SELECT job_id, count(*) FROM queue_engine.job_events WHERE kind = 'succeeded'"
            " GROUP BY job_id HAVING count(*) <> 1"
        ).fetchall()
        succeeded_events = conn.execute(
            "SELECT count(DISTINCT job_id) FROM queue_engine.job_events WHERE kind = 'succeeded'"
        ).fetchone()
        reconnects = sum(log.read_text().count("worker.reconnected") for log in logs)
    assert twice == [], "jobs finished twice"
    assert succeeded_events == (JOBS,)
    print(f"reconnects logged: {reconnects}")
    assert reconnects >= 2 * WORKERS
