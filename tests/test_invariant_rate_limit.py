"""Invariant: a rate-limited queue starts at most ``rate + burst`` jobs in any second.

Three real workers (``Worker`` in threads) drain 50 instant jobs from a queue
limited to 20 jobs/s with a burst of 1. Unlimited, they would finish in a few
tens of milliseconds; limited, the claim takes one token per job from the
bucket on the queue's row, so every one-second window of claim times holds at
most 21 starts (plus 1 of slack: a claim's ``now()`` is read when its
statement starts, a few milliseconds before it gets the bucket's row lock),
and the whole run spans at least (50 - burst) / rate seconds.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import psycopg
from support.workers import all_in, running_worker, wait_until

from queue_engine import Client

S = "queue_engine"
Q = "wt"
RATE = 20
BURST = 1
JOBS = 50


def test_rate_limit_holds_across_workers(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(
        f"INSERT INTO {S}.queues (name, rate_limit, rate_burst) VALUES (%s, %s, %s)",
        (Q, RATE, BURST),
    )
    with ExitStack() as stack:
        for _ in range(3):
            stack.enter_context(running_worker(dsn))
        client.enqueue_many([{"task": "echo", "queue": Q} for _ in range(JOBS)])
        wait_until(all_in(dsn, {"succeeded"}), timeout=60, what="all jobs succeeded")
    starts = [r[0] for r in conn.execute(f"SELECT started_at FROM {S}.jobs ORDER BY started_at")]
    assert len(starts) == JOBS
    window = timedelta(seconds=1)
    busiest = max(sum(1 for t in starts[i:] if t < s + window) for i, s in enumerate(starts))
    assert busiest <= RATE + BURST + 1
    span = (starts[-1] - starts[0]).total_seconds()
    assert span >= (JOBS - BURST) / RATE - 0.1
    # More than one worker took part: the limit is cluster-wide, not per worker.
    workers = conn.execute(f"SELECT count(DISTINCT claimed_by) FROM {S}.jobs").fetchone()
    assert workers is not None and workers[0] >= 2
