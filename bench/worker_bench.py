"""Claim-worker throughput and wake latency of queue-engine. Not a test: it prints numbers.

Usage::

    python bench/worker_bench.py                         # embedded Postgres, durable defaults
    python bench/worker_bench.py --k 1,2,4 --prefetch 1,100 --jobs 20000
    python bench/worker_bench.py --dsn postgresql://postgres@localhost/postgres

Drain: bulk-enqueue ``--jobs`` no-op jobs, ANALYZE and CHECKPOINT, start K
``queue-claim-worker`` processes, wait until none is unfinished; jobs/s = N /
(last ``finished_at`` - first ``started_at``), from the jobs table.

Latency: K idle workers (default 2), warmed up; ``--latency-jobs`` jobs
enqueued one at a time at ``--rate``/s by this process, each carrying
``t = time.time()`` taken just before the enqueue; the handler returns
``time.time() - t`` as its result. Reports p50/p95/p99/max ms.

Every measurement gets a fresh database (``lib.postgres``: an embedded server
with initdb's durable defaults, or ``--dsn`` with CREATEDB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import psycopg
from lib.postgres import fresh_database, server
from lib.timing import paced, pct
from lib.workers import (
    QUEUE,
    drain,
    enqueue_noops,
    finished_span,
    start_workers,
    stop_workers,
    unfinished,
)

from queue_engine import Client


def drain_once(
    admin_dsn: str, n: int, k: int, prefetch: int, env: dict[str, str], timeout: float
) -> tuple[float, float, float]:
    """One drain measurement: jobs/s, server CPU ms per job, worker CPU ms per job."""
    with fresh_database(admin_dsn) as dsn:
        enqueue_noops(dsn, n)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE queue_engine.jobs")
            conn.execute("CHECKPOINT")
            cpu = drain(conn, dsn, k, prefetch=prefetch, env=env, timeout=timeout)
            done, seconds = finished_span(conn)
        if done != n:
            print(f"  warning: only {done} of {n} jobs succeeded", file=sys.stderr)
        return done / seconds, cpu.server_cpu_s / n * 1000, cpu.worker_cpu_s / n * 1000


def latency(
    admin_dsn: str, m: int, rate: float, k: int, env: dict[str, str], timeout: float
) -> list[float]:
    """Wake latencies (seconds) of M jobs enqueued one by one at ``rate``/s to K idle workers."""
    with fresh_database(admin_dsn) as dsn, Client(dsn) as client:
        procs = start_workers(dsn, k, env=env)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for _ in range(20):  # warm-up: workers connected and listening
                    client.enqueue("noop", queue=QUEUE)
                deadline = time.monotonic() + timeout
                while unfinished(conn) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(1.0)  # idle: every worker is waiting for a notification
                conn.execute("DELETE FROM queue_engine.jobs")
                for _ in paced(m, rate):
                    client.enqueue("noop", queue=QUEUE, args={"t": time.time()})
                while unfinished(conn) and time.monotonic() < deadline + m / rate:
                    time.sleep(0.05)
                rows = conn.execute(
                    "SELECT (result)::float8 FROM queue_engine.jobs WHERE status = 'succeeded'"
                ).fetchall()
        finally:
            stop_workers(procs)
    return sorted(float(r[0]) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("QUEUE_ENGINE_DSN", ""))
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--k", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--prefetch", default="1,100", help="prefetch values, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-jobs", type=int, default=500)
    parser.add_argument("--latency-workers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument(
        "--synchronous-commit",
        default=None,
        help="QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT for the workers (default: the worker's, off)",
    )
    parser.add_argument("--timeout", type=float, default=600.0)
    opts = parser.parse_args()
    env: dict[str, str] = {}
    if opts.synchronous_commit:
        env["QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT"] = opts.synchronous_commit
    ks = [int(x) for x in opts.k.split(",") if x]
    prefetches = [int(x) for x in opts.prefetch.split(",") if x]
    with server(opts.dsn) as admin:
        results: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
        for _round in range(opts.rounds):  # rounds interleaved so drifts hit every setting
            for prefetch in prefetches:
                for k in ks:
                    got = drain_once(admin, opts.jobs, k, prefetch, env, opts.timeout)
                    results.setdefault((k, prefetch), []).append(got)
                    print(
                        f"  drain K={k} prefetch={prefetch}: {got[0]:,.0f} jobs/s, CPU ms/job "
                        f"server {got[1]:.3f} workers {got[2]:.3f}",
                        file=sys.stderr,
                    )
        print(
            f"\ndrain, N={opts.jobs:,} no-op jobs, median of {opts.rounds}: jobs/s (min-max),"
            " CPU ms per job server / workers"
        )
        for (k, prefetch), rounds in sorted(results.items(), key=lambda kv: kv[0][::-1]):
            rates = [r[0] for r in rounds]
            server_ms = statistics.median(r[1] for r in rounds)
            worker_ms = statistics.median(r[2] for r in rounds)
            print(
                f"  K={k} prefetch={prefetch:<4} {statistics.median(rates):>9,.0f}"
                f"   ({min(rates):,.0f}-{max(rates):,.0f})   {server_ms:.3f} / {worker_ms:.3f}"
            )
        if not opts.no_latency:
            lat = latency(
                admin, opts.latency_jobs, opts.rate, opts.latency_workers, env, opts.timeout
            )
            ms = [v * 1000 for v in lat]
            print(
                f"\nwake latency, {len(ms)} jobs at {opts.rate:g}/s to {opts.latency_workers} idle "
                f"workers: p50 {pct(ms, 50):.1f} / p95 {pct(ms, 95):.1f} / p99 {pct(ms, 99):.1f}"
                f" / max {max(ms):.1f} ms"
            )


if __name__ == "__main__":
    main()
