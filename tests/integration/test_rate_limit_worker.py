"""A worker facing a rated key waits for the token instead of polling (worker/ratewait.py).

A real worker (in a thread) drains jobs of one concurrency key rated 5 a
second (burst 1), with a long idle poll (2 s): every statement its session
sends is counted. Without the claim's "rate due" notice the worker would
wait a whole idle poll after each token's job, taking one job per poll; with
it, it claims again when the next token is due. Checked: the key never runs
faster than its bucket allows (burst + rate * t), the worker keeps up with the
rate, and it sends a bounded number of statements per job (no spin).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from support.workers import running_worker, wait_until

from queue_engine.worker.connection import WorkerConnection

RATE = 5.0
RUN_S = 3.0


def test_an_idle_worker_sleeps_until_the_token_is_due(
    dsn: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn.execute(
        "INSERT INTO queue_engine.rate_buckets (key, rate, burst, tokens) VALUES ('api', %s, 1, 1)",
        (RATE,),
    )
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, args, concurrency_key)"
        " SELECT 'wt', 'echo', '{}', 'api' FROM generate_series(1, 200)"
    )
    statements = 0
    run = WorkerConnection.run

    def counted(self: WorkerConnection, *args: Any, **kwargs: Any) -> Any:
        nonlocal statements
        statements += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(WorkerConnection, "run", counted)
    with running_worker(dsn, poll_s=2.0, heartbeat_s=1.0):
        wait_until(
            lambda: (
                conn.execute(
                    "SELECT count(*) > 0 FROM queue_engine.jobs WHERE status <> 'queued'"
                ).fetchone()
                == (True,)
            ),
            timeout=30,
            what="the first job claimed",
        )
        before = statements
        time.sleep(RUN_S)
        during = statements - before
    row = conn.execute(
        "SELECT count(*), extract(epoch FROM max(started_at) - min(started_at))"
        " FROM queue_engine.jobs WHERE started_at IS NOT NULL"
    ).fetchone()
    assert row is not None
    started, span = int(row[0]), float(row[1] or 0)
    print(f"\n{started} jobs in {span:.2f} s, {during} statements in {RUN_S} s")
    # Never faster than the bucket: 1 (the burst) + rate * span (+1: started_at
    # is the claim's transaction start, the token's clock a moment later).
    assert started <= 1 + RATE * span + 1, (started, span)
    # Kept up: an idle poll per job would have started about 2 in 3 s.
    assert started >= RATE * RUN_S / 2, (started, span)
    # No spin: a claim per token and the heartbeat's few, not a poll every few ms.
    assert during <= 3 * RATE * RUN_S + 10, during
