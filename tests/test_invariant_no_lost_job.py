"""Invariant: a job is never lost, whatever happens to the worker process running it.

``kill -9`` of a worker in the middle of a job: with a ``queue-orchestrator``
leading, the job is given back as soon as the worker's session ends, runs
again on another worker, and ends ``succeeded`` exactly once (one
``succeeded`` event), while every other job of the batch succeeds once too.
The larger version, with repeated kills, is ``tests/process/test_chaos.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from support.workers import kill_all, spawn_worker, wait_until

BIN = Path(sys.executable).parent
JOBS = 40


def spawn_orchestrator(dsn: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "QUEUE_ENGINE_SWEEP_S": "0.2",
        "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
        "QUEUE_ENGINE_ELECT_S": "0.2",
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(BIN / "queue-orchestrator"), "--dsn", dsn],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def one(conn: psycopg.Connection[tuple[object, ...]], query: str, *args: object) -> object:
    row = conn.execute(query, args).fetchone()  # type: ignore[arg-type]
    return None if row is None else row[0]


def test_a_job_of_a_sigkilled_worker_succeeds_exactly_once(dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        # One long job (attempt 1 sleeps for a minute: it is running when the kill comes),
        # then a batch of short ones that keep both workers busy.
        victim_job = one(
            conn,
            "INSERT INTO queue_engine.jobs (queue, task, args, priority)"
            " VALUES ('wt', 'zombie_sleep', '{\"sleep\": 60}', 0) RETURNING id",
        )
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, args)"
            " SELECT 'wt', 'sleepy', jsonb_build_object('sleep', 0.05, 'i', i)"
            " FROM generate_series(1, %s) i",
            (JOBS,),
        )
        procs = [spawn_orchestrator(dsn, tmp_path / "orchestrator.log")]
        try:
            procs += [spawn_worker(dsn, log_file=tmp_path / f"w{i}.log") for i in range(2)]
            owner = wait_until(
                lambda: one(
                    conn,
                    "SELECT w.pid FROM queue_engine.jobs j JOIN queue_engine.workers w"
                    " ON w.id = j.claimed_by WHERE j.id = %s AND j.status = 'running'",
                    victim_job,
                ),
                what="the long job running",
            )
            [victim] = [p for p in procs[1:] if p.pid == owner]
            killed = time.monotonic()
            victim.kill()
            victim.wait(10)
            procs.append(spawn_worker(dsn, log_file=tmp_path / "w2.log"))
            wait_until(
                lambda: one(
                    conn,
                    "SELECT count(*) = %s FROM queue_engine.jobs WHERE status = 'succeeded'",
                    JOBS + 1,
                ),
                timeout=60,
                what="every job succeeded",
            )
            print(
                f"\nno lost job: all {JOBS + 1} succeeded {time.monotonic() - killed:.2f} s "
                "after the kill -9"
            )
        finally:
            kill_all(procs)
        assert one(conn, "SELECT attempt FROM queue_engine.jobs WHERE id = %s", victim_job) == 2
        kinds = [
            r[0]
            for r in conn.execute(
                "SELECT kind FROM queue_engine.job_events WHERE job_id = %s ORDER BY id",
                (victim_job,),
            ).fetchall()
        ]
        assert kinds == ["claimed", "recovered", "claimed", "succeeded"], kinds
        twice = one(
            conn,
            "SELECT count(*) FROM (SELECT job_id FROM queue_engine.job_events"
            " WHERE kind = 'succeeded' GROUP BY job_id HAVING count(*) <> 1) t",
        )
        assert twice == 0
        assert one(conn, "SELECT count(*) FROM queue_engine.jobs WHERE status <> 'succeeded'") == 0
