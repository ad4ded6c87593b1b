"""Fair share across partitions: a small tenant's wait beside a noisy tenant's backlog.

Not a test: it prints numbers. Usage::

    python bench/fairness.py                       # 1,000,000 noisy jobs, K=4, 2 ms handler
    python bench/fairness.py --noisy 100000        # a quicker look

Issue 36 §2 asks: a small tenant's p95 wait (10 jobs) while a noisy tenant has
1,000,000 queued, against its p95 wait on an otherwise idle queue, in the same
run: within 2x. One embedded server (fsync on; or ``--dsn`` with CREATEDB),
one fresh database, K real ``queue-claim-worker`` processes on queue
``bench`` running the ``sleep`` task of ``bench/lib/tasks.py`` (``--ms``
milliseconds), prefetch 1. In order:

1. the bulk cost: ``--noisy`` jobs without a partition key enqueued with
   ``Client.enqueue_many`` (1,000 a call) into a queue no worker serves, timed,
   then removed; the same jobs with a partition key (``noisy``) timed the same
   way (the difference is the row-rules trigger's fair tag, migration 0032);
   they stay queued in a queue no worker serves, deleted after;
2. (a) idle: the workers run on an empty queue ``bench``; the small tenant
   (partition ``small``) enqueues its 10 jobs, in one call (``burst``) and,
   after they ran, one every ``--gap-ms`` (``paced``), once 20 plain
   warm-up jobs have run (the workers are up);
3. (b) noisy: the same ``--noisy`` jobs of partition ``noisy`` are enqueued
   into ``bench`` (workers stopped), the workers start, run the warm-up
   jobs and then the noisy ones for ``--settle`` seconds, then the small tenant enqueues its 10 jobs again
   (burst, then paced) while the noisy backlog is queued.

A job's wait is ``started_at - created_at`` (created_at is the enqueuing
transaction's start, started_at the claim's), read from the jobs table. Each
scenario is run ``--rounds`` times; the table gives each round's p95 and the
median of the rounds. The trigger's cost per partitioned row is the difference
of the two bulk times over the number of rows.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import psycopg
from lib.postgres import fresh_database, server
from lib.report import log, table
from lib.timing import pct
from lib.workers import start_workers, stop_workers

from queue_engine import Client

QUEUE = "bench"
#: Where the bulk-cost fills go: no worker serves it.
PARKED = "fill"
SMALL = 10
Conn = psycopg.Connection[Any]


def fill(dsn: str, n: int, queue: str, partition: str | None, ms: float) -> float:
    """Seconds to enqueue ``n`` jobs of ``partition`` in calls of 1,000."""
    job: dict[str, Any] = {"task": "sleep", "queue": queue, "args": {"ms": ms}}
    if partition is not None:
        job["partition_key"] = partition
    started = time.perf_counter()
    with Client(dsn) as client:
        for start in range(0, n, 1000):
            client.enqueue_many([job] * min(1000, n - start))
    return time.perf_counter() - started


def waits_ms(conn: Conn, ids: list[int], timeout: float = 120.0) -> list[float]:
    """The jobs' waits (ms), once all have started."""
    deadline = time.monotonic() + timeout
    while True:
        rows = conn.execute(
            "SELECT extract(epoch FROM started_at - created_at) * 1000"
            " FROM queue_engine.jobs WHERE id = ANY(%s) AND started_at IS NOT NULL",
            (ids,),
        ).fetchall()
        if len(rows) == len(ids) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if len(rows) < len(ids):
        raise SystemExit(f"only {len(rows)} of {len(ids)} small-tenant jobs started")
    return sorted(float(r[0]) for r in rows)


def small_tenant(client: Client, conn: Conn, ms: float, gap_ms: float | None) -> float:
    """p95 wait (ms) of the small tenant's 10 jobs: in one call, or one every ``gap_ms``."""
    job = {"task": "sleep", "queue": QUEUE, "args": {"ms": ms}, "partition_key": "small"}
    if gap_ms is None:
        ids = client.enqueue_many([job] * SMALL)
    else:
        ids = []
        for _ in range(SMALL):
            ids.append(client.enqueue(**job).id)
            time.sleep(gap_ms / 1000)
    return pct(waits_ms(conn, ids), 95)


def warm_up(client: Client, conn: Conn, ms: float) -> None:
    """Wait until the workers run jobs: 20 plain jobs (they go first), all started."""
    ids = client.enqueue_many([{"task": "sleep", "queue": QUEUE, "args": {"ms": ms}}] * 20)
    waits_ms(conn, ids)


def queued(conn: Conn, queue: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE queue = %s AND status = 'queued'", (queue,)
    ).fetchone()
    return int(row[0]) if row else 0


def scenario(client: Client, conn: Conn, args: argparse.Namespace) -> dict[str, list[float]]:
    """Each round's p95 of the burst and the paced small tenant."""
    out: dict[str, list[float]] = {"burst": [], "paced": []}
    for _ in range(args.rounds):
        out["burst"].append(small_tenant(client, conn, args.ms, None))
        out["paced"].append(small_tenant(client, conn, args.ms, args.gap_ms))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="an existing server (default: an embedded one)")
    parser.add_argument("--noisy", type=int, default=1_000_000, help="the noisy tenant's jobs")
    parser.add_argument("--k", type=int, default=4, help="worker processes")
    parser.add_argument("--ms", type=float, default=2.0, help="the handler's sleep, ms")
    parser.add_argument("--gap-ms", type=float, default=20.0, help="paced: ms between jobs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=3.0, help="s of drain before (b)")
    args = parser.parse_args()

    with (
        server(args.dsn or "") as admin,
        fresh_database(admin) as dsn,
        psycopg.connect(dsn, autocommit=True) as conn,
        Client(dsn) as client,
    ):
        log(f"bulk: {args.noisy:,} jobs without a partition key")
        plain_s = fill(dsn, args.noisy, PARKED, None, args.ms)
        conn.execute("DELETE FROM queue_engine.jobs WHERE queue = %s", (PARKED,))
        conn.execute("VACUUM ANALYZE queue_engine.jobs")
        log(f"bulk: {args.noisy:,} jobs of partition noisy")
        part_s = fill(dsn, args.noisy, PARKED, "noisy", args.ms)
        conn.execute("DELETE FROM queue_engine.jobs WHERE queue = %s", (PARKED,))
        conn.execute("VACUUM ANALYZE queue_engine.jobs")

        log(f"(a) idle queue, K={args.k}")
        procs = start_workers(dsn, args.k)
        try:
            time.sleep(2)
            idle = scenario(client, conn, args)
        finally:
            stop_workers(procs)

        log(f"(b) fill {args.noisy:,} noisy jobs into {QUEUE}")
        fill_b = fill(dsn, args.noisy, QUEUE, "noisy", args.ms)
        conn.execute("ANALYZE queue_engine.jobs")
        procs = start_workers(dsn, args.k)
        try:
            time.sleep(args.settle)
            before = queued(conn, QUEUE)
            noisy = scenario(client, conn, args)
            after = queued(conn, QUEUE)
        finally:
            stop_workers(procs)

    print()
    table(
        ["bulk enqueue (enqueue_many, 1,000 a call)", "jobs", "seconds", "jobs/s", "us/job"],
        [
            [
                "no partition key",
                f"{args.noisy:,}",
                f"{plain_s:.1f}",
                f"{args.noisy / plain_s:,.0f}",
                f"{plain_s / args.noisy * 1e6:.1f}",
            ],
            [
                "partition key (fair tag)",
                f"{args.noisy:,}",
                f"{part_s:.1f}",
                f"{args.noisy / part_s:,.0f}",
                f"{part_s / args.noisy * 1e6:.1f}",
            ],
            [
                "(b)'s fill, one partition",
                f"{args.noisy:,}",
                f"{fill_b:.1f}",
                f"{args.noisy / fill_b:,.0f}",
                f"{fill_b / args.noisy * 1e6:.1f}",
            ],
        ],
    )
    print(f"\ntrigger cost per partitioned row: {(part_s - plain_s) / args.noisy * 1e6:.1f} us")
    print(f"noisy backlog queued during (b): {before:,} before, {after:,} after\n")
    rows = []
    for kind in ("burst", "paced"):
        a, b = statistics.median(idle[kind]), statistics.median(noisy[kind])
        rows.append(
            [
                kind,
                " ".join(f"{x:.1f}" for x in idle[kind]),
                " ".join(f"{x:.1f}" for x in noisy[kind]),
                f"{a:.1f}",
                f"{b:.1f}",
                f"{b / a:.2f}x",
            ]
        )
    table(
        [
            "small tenant (10 jobs)",
            "(a) idle p95 ms, rounds",
            "(b) noisy p95 ms, rounds",
            "(a) median",
            "(b) median",
            "(b)/(a)",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
