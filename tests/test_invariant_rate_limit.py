"""Invariant: worker processes never start a rated key's jobs faster than its bucket allows.

Real ``queue-claim-worker`` processes (half of them claiming three jobs at a
time, the batch form of the claim) drain a backlog of one key rated 8 a
second with a burst of 4, weights 1 and 2 mixed, plus plain jobs. From the
claim events, in event id order (a claim of a key is serialised with every
other claim of it, and writes its events after taking its tokens), a replay
of the bucket: over every stretch of claims from the i-th to the j-th, the
tokens taken are at most burst + rate * (t_j - t_i) plus the heaviest weight
(a batch may overdraw by one job's weight, repaid before the next claim),
plus one token: an event's time is its claim's transaction start, a few ms
before the claim takes its tokens.
Every job is claimed once (no failure, no retry) and every plain job runs
although the key's backlog is ahead of it.
"""

from __future__ import annotations

import functools
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
from support.workers import idle_workers, kill_all, spawn_worker, wait_until

WORKERS = 4
RATE = 8.0
BURST = 4
KEYED = 60
PLAIN = 20


def test_a_rated_key_never_outruns_its_bucket(dsn: str, tmp_path: Path) -> None:
    procs: list[subprocess.Popen[bytes]] = []
    spawn = functools.partial(spawn_worker, dsn)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for i in range(WORKERS):
                procs.append(
                    spawn("--prefetch", "3" if i % 2 else "1", log_file=tmp_path / f"w{i}.log")
                )
            wait_until(lambda: idle_workers(conn, "wt") == WORKERS, timeout=90, what="idle")
            conn.execute(
                "INSERT INTO queue_engine.rate_buckets (key, rate, burst, tokens)"
                " VALUES ('api', %s, %s, %s)",
                (RATE, BURST, BURST),
            )
            conn.execute(
                "INSERT INTO queue_engine.jobs (queue, task, args, priority, concurrency_key,"
                " weight) SELECT 'wt', 'echo', '{}', 0, 'api', CASE WHEN g %% 3 = 0 THEN 2 END"
                " FROM generate_series(1, %s) g",
                (KEYED,),
            )
            conn.execute(
                "INSERT INTO queue_engine.jobs (queue, task, args, priority)"
                " SELECT 'wt', 'echo', '{}', 100 FROM generate_series(1, %s)",
                (PLAIN,),
            )
            started = time.monotonic()

            def plain_done() -> bool:
                row = conn.execute(
                    "SELECT count(*) FROM queue_engine.jobs"
                    " WHERE concurrency_key IS NULL AND status = 'succeeded'"
                ).fetchone()
                return row == (PLAIN,)

            wait_until(plain_done, timeout=60, what="the plain jobs ran")
            plain_s = time.monotonic() - started
            wait_until(
                lambda: (
                    conn.execute(
                        "SELECT count(*) FROM queue_engine.jobs WHERE status = 'succeeded'"
                    ).fetchone()
                    == (KEYED + PLAIN,)
                ),
                timeout=120,
                what="every job succeeded",
            )
            claims: list[tuple[Any, ...]] = conn.execute(
                "SELECT extract(epoch FROM clock_timestamp() - e.at)::float8,"
                " coalesce(j.weight, 1), e.attempt FROM queue_engine.job_events e"
                " JOIN queue_engine.jobs j ON j.id = e.job_id"
                " WHERE j.concurrency_key = 'api' AND e.to_status = 'running' ORDER BY e.id"
            ).fetchall()
    finally:
        kill_all(procs)
    assert len(claims) == KEYED and all(c[2] == 1 for c in claims), claims
    ages = [float(c[0]) for c in claims]  # seconds before the read, so decreasing
    weights = [int(c[1]) for c in claims]
    worst = 0.0
    for i in range(len(claims)):
        taken = 0
        for j in range(i, len(claims)):
            taken += weights[j]
            allowed = BURST + RATE * max(0.0, ages[i] - ages[j]) + max(weights) + 1
            worst = max(worst, taken - allowed)
    span = ages[0] - ages[-1]
    spent = sum(weights)
    print(
        f"\n{len(claims)} keyed claims ({spent} tokens) in {span:.2f} s:"
        f" {(spent - BURST) / span:.2f} tokens/s after the burst (rate {RATE});"
        f" worst excess {worst:.2f}; plain jobs done after {plain_s:.2f} s"
    )
    assert worst <= 0, worst
