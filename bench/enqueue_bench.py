"""Enqueue throughput of queue-engine: bulk, chunked bulk, single-row, and NOTIFY count.

Not a test: it prints numbers. Usage::

    python bench/enqueue_bench.py                   # embedded Postgres, default settings
    python bench/enqueue_bench.py --dsn postgresql://postgres@localhost/postgres
    python bench/enqueue_bench.py --jobs 20000 --single 1000 --rounds 5

Every measurement runs on a fresh database (``lib.postgres``: an embedded
server with initdb's durable defaults, or ``--dsn`` / ``QUEUE_ENGINE_DSN`` with
CREATEDB), migrated and then checkpointed when the role may, so no run sees the
rows, the dead tuples or the pending checkpoint of another. Each figure is the
median of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from lib import postgres
from lib.postgres import checkpoint, describe, server
from psycopg import sql

from queue_engine import Client

CHANNEL = "queue_engine.jobs"
CHUNK = 1_000
NOTIFY_ROWS = 50_000
BENCH_QUEUE = "bench"


@contextmanager
def fresh_database(admin_dsn: str) -> Iterator[str]:
    """A fresh migrated database, checkpointed (when the role may) so it starts clean."""
    with postgres.fresh_database(admin_dsn) as dsn:
        checkpoint(admin_dsn)
        yield dsn


def job_items(n: int) -> list[dict[str, Any]]:
    """``n`` enqueue_many items of one queue, with small distinct args."""
    return [{"task": "bench.noop", "queue": BENCH_QUEUE, "args": {"i": i}} for i in range(n)]


def count_jobs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
    return int(row[0]) if row else 0


def bulk_one_call(dsn: str, n: int) -> float:
    """Seconds to enqueue ``n`` jobs with one ``enqueue_many`` call (validation included)."""
    items = job_items(n)
    with Client(dsn) as client:
        client.list(limit=1)  # open the pool outside the timed part
        start = time.perf_counter()
        ids = client.enqueue_many(items)
        elapsed = time.perf_counter() - start
    assert len(ids) == n and count_jobs(dsn) == n
    return elapsed


def bulk_chunked(dsn: str, n: int) -> float:
    """Seconds to enqueue ``n`` jobs in ``enqueue_many`` calls of 1,000 (one transaction each)."""
    items = job_items(n)
    with Client(dsn) as client:
        client.list(limit=1)  # open the pool outside the timed part
        start = time.perf_counter()
        for i in range(0, n, CHUNK):
            client.enqueue_many(items[i : i + CHUNK])
        elapsed = time.perf_counter() - start
    assert count_jobs(dsn) == n
    return elapsed


def single_rows(dsn: str, n: int) -> float:
    """Seconds to enqueue ``n`` jobs with ``enqueue``, each its own committed transaction."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        client = Client(conn=conn)
        start = time.perf_counter()
        for i in range(n):
            client.enqueue("bench.noop", queue=BENCH_QUEUE, args={"i": i})
        elapsed = time.perf_counter() - start
    assert count_jobs(dsn) == n
    return elapsed


def notify_count(dsn: str, n: int) -> int:
    """One bulk insert of ``n`` rows: the notifications received on ``queue_engine.jobs``.

    The wake-up is sent per row (from the row trigger, migration 0026) and
    Postgres folds identical notifications of a transaction, so one queue
    should deliver one however many rows there are."""
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
        with Client(dsn) as client:
            client.enqueue_many(job_items(n))
        received = list(listener.notifies(timeout=2.0))
    assert count_jobs(dsn) == n
    return sum(1 for note in received if note.channel == CHANNEL)


def median_of(rounds: int, admin_dsn: str, measure: Callable[[str], float]) -> float:
    results = []
    for _ in range(rounds):
        with fresh_database(admin_dsn) as dsn:
            results.append(measure(dsn))
    return statistics.median(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("QUEUE_ENGINE_DSN", ""),
        help="admin DSN of the server to use (needs CREATEDB); default: QUEUE_ENGINE_DSN, "
        "else an embedded Postgres",
    )
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs per bulk measurement")
    parser.add_argument("--single", type=int, default=3_000, help="jobs of the single-row test")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure (median)")
    options = parser.parse_args()
    if options.jobs < 2 or options.single < 2 or options.rounds < 1:
        parser.error("--jobs and --single must be at least 2, --rounds at least 1")

    with server(options.dsn) as admin:
        info = describe(admin, "fsync", "synchronous_commit", "wal_level")
        rounds = options.rounds
        rows = []
        seconds = median_of(rounds, admin, lambda d: bulk_one_call(d, options.jobs))
        rows.append((f"enqueue_many, {options.jobs:,} jobs in 1 call", options.jobs, seconds))
        seconds = median_of(rounds, admin, lambda d: bulk_chunked(d, options.jobs))
        rows.append(
            (f"enqueue_many, {options.jobs:,} jobs in calls of {CHUNK:,}", options.jobs, seconds)
        )
        seconds = median_of(rounds, admin, lambda d: single_rows(d, options.single))
        rows.append((f"enqueue, {options.single:,} jobs, 1 txn each", options.single, seconds))
        notifies = []
        for _ in range(rounds):
            with fresh_database(admin) as dsn:
                notifies.append(notify_count(dsn, NOTIFY_ROWS))

    print(f"{info} ({'--dsn' if options.dsn else 'embedded, default settings'})")
    print(f"median of {rounds} round(s); a fresh, migrated database per measurement")
    print()
    width = max(len(r[0]) for r in rows)
    print(f"{'measurement':<{width}}  {'seconds':>9}  {'jobs/s':>10}")
    for label, n, secs in rows:
        print(f"{label:<{width}}  {secs:>9.3f}  {n / secs:>10,.0f}")
    print()
    received = ", ".join(str(n) for n in notifies)
    print(f"one enqueue_many of {NOTIFY_ROWS:,} rows into 1 queue, per round:")
    print(f"  NOTIFYs received by a LISTENer on {CHANNEL!r}: {received}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
