"""Invariant: archiving never hides a job, never shows it twice, never changes it.

The archiver (migration 0027) moves succeeded jobs from ``jobs`` to
``jobs_archive`` while everything else goes on. Every snapshot must see each
job exactly once through ``jobs_all``, and a job read by id must read the
same before, during and after its move.

1. In process: a mover thread archives 2,000 succeeded jobs in batches of 50
   while the test reads all of them through ``jobs_all`` and ``Client.get``
   over and over.
2. With real processes: a ``queue-orchestrator`` archiving after 1 s and a
   ``queue-claim-worker`` run 200 jobs while the test polls every job by id;
   each ends succeeded exactly once, in the archive, with its events and result.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
from support.workers import kill_all, spawn_worker, wait_until

from queue_engine import Client
from queue_engine.orchestrator.archiver import Cursor, archive_once

BIN = Path(sys.executable).parent
SCHEMA = "queue_engine"


def test_every_snapshot_sees_each_job_exactly_once_while_it_moves(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ids = [
            int(r[0])
            for r in conn.execute(
                "INSERT INTO queue_engine.jobs (queue, task, status, attempt, args, result, "
                "created_at, started_at, finished_at, duration_ms) "
                "SELECT 'inv', 'inv.task', 'succeeded', 1, jsonb_build_object('n', g), "
                "jsonb_build_object('r', g), now() - interval '1 hour', now() - interval '1 hour', "
                "now() - interval '10 minutes' + make_interval(secs => g / 1000.0), 5 "
                "FROM generate_series(1, 2000) g RETURNING id"
            )
        ]
    client = Client(dsn)
    expected = {i: client.get(i) for i in random.sample(ids, 50)}
    done = threading.Event()
    moved: list[int] = []

    def mover() -> None:
        with psycopg.connect(dsn, autocommit=True) as mconn:
            cursor = Cursor()
            while True:
                result = archive_once(mconn, SCHEMA, 60.0, cursor, batch_size=50, max_batches=1)
                moved.append(result.moved)
                if not result.more:
                    break
        done.set()

    thread = threading.Thread(target=mover)
    thread.start()
    reads = 0
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not done.is_set() or reads < 3:
                row = conn.execute(
                    "SELECT count(*), count(DISTINCT id) FROM queue_engine.jobs_all "
                    "WHERE id = ANY(%s)",
                    (ids,),
                ).fetchone()
                assert row == (2000, 2000), row
                for job_id, job in expected.items():
                    assert client.get(job_id) == job
                reads += 1
    finally:
        thread.join()
        client.close()
    assert sum(moved) == 2000
    assert len([m for m in moved if m]) == 40  # 40 moves of 50, each its own statement


def test_jobs_run_by_real_processes_are_archived_unchanged(dsn: str, tmp_path: Path) -> None:
    with Client(dsn) as client:
        ids = client.enqueue_many(
            [{"task": "echo", "queue": "wt", "args": {"i": i}} for i in range(200)]
        )
        env = {
            **os.environ,
            "QUEUE_ENGINE_ARCHIVE_AFTER_S": "1",
            "QUEUE_ENGINE_ARCHIVE_S": "0.1",
            "QUEUE_ENGINE_ELECT_S": "0.2",
        }
        with (tmp_path / "orchestrator.log").open("wb") as out:
            orchestrator = subprocess.Popen(
                [str(BIN / "queue-orchestrator"), "--dsn", dsn],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        worker = spawn_worker(dsn, log_file=tmp_path / "worker.log")
        try:

            def all_archived() -> bool:
                # Every poll reads every job by id: none may be missing at any time.
                jobs = [client.get(i) for i in ids]
                assert all(j.status in ("queued", "running", "succeeded") for j in jobs)
                with psycopg.connect(dsn, autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT count(*) FROM queue_engine.jobs_archive WHERE id = ANY(%s)",
                        (ids,),
                    ).fetchone()
                return row == (200,)

            wait_until(all_archived, timeout=60, interval=0.2, what="all 200 jobs archived")
        finally:
            kill_all([worker, orchestrator])
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute(
                "SELECT count(*) FROM queue_engine.jobs WHERE id = ANY(%s)", (ids,)
            ).fetchone() == (0,)
            events = conn.execute(
                "SELECT count(*) FILTER (WHERE kind = 'succeeded'), count(DISTINCT job_id) "
                "FROM queue_engine.job_events WHERE job_id = ANY(%s)",
                (ids,),
            ).fetchone()
        assert events == (200, 200)
        for i, job_id in enumerate(ids):
            job = client.get(job_id)
            assert job.status == "succeeded" and job.result == {"echo": {"i": i}}
