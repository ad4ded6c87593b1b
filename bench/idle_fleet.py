"""What an idle fleet costs the database. Not a test: it prints numbers.

Usage::

    python bench/idle_fleet.py                       # 200 idle workers, embedded Postgres
    python bench/idle_fleet.py --workers 50,200 --window 30 --rate 10

For each fleet size: start that many ``queue-claim-worker`` processes on one
queue, wait until every one has registered and a few seconds more, then
measure over ``--window`` seconds

- **idle**: no jobs at all. The database's CPU (user + system seconds of every
  server process, from ``/proc``, over the window) as a percentage of one
  core; the statements per second the fleet sends (``pg_stat_statements``
  calls, this script's own left out); the workers' own CPU.
- **trickle**: ``--rate`` jobs per second enqueued one at a time: every job's
  NOTIFY reaches every idle worker on the queue, so this shows what the
  fan-out of one wake-up costs (statements per job).

CPU seconds are counted, not wall time, so other load on the machine moves
the figures less than it moves throughput, but a 2-core machine under load
still inflates them somewhat: compare figures from one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from worker_bench import cpu_seconds, fresh_database, server_pids, stop_workers

from queue_engine import Client

WORKER_BIN = Path(sys.executable).parent / "queue-claim-worker"
QUEUE = "bench"


@contextmanager
def big_server(max_connections: int) -> Iterator[str]:
    """An embedded server allowing ``max_connections`` sessions (durable defaults)."""
    from queue_engine.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="qe-idle-"))
    pg = EmbeddedPostgres(
        folder / "data",
        max_connections=max_connections,
        settings={"shared_preload_libraries": "pg_stat_statements"},
    )
    try:
        yield pg.start()
    finally:
        pg.destroy()
        shutil.rmtree(folder, ignore_errors=True)


def start_fleet(dsn: str, n: int, worker_bin: Path = WORKER_BIN) -> list[subprocess.Popen[bytes]]:
    """N workers on one queue, quiet logs."""
    argv = [str(worker_bin), f"--queue={QUEUE}", "--app", "queue_engine.bench_app"]
    argv += ["--dsn", dsn, "--log-level", "WARNING"]
    return [
        subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(n)
    ]


def wait_registered(conn: psycopg.Connection[tuple[object, ...]], n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM queue_engine.workers WHERE role = 'worker' AND stopped_at IS NULL"
        ).fetchone()
        if row and int(row[0]) >= n:
            return
        time.sleep(0.5)
    raise SystemExit(f"only some of {n} workers registered within {timeout:.0f}s")


def statements(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Statements run in this database so far (pg_stat_statements), other than this script's reads."""
    row = conn.execute(
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND query NOT ILIKE '%pg_stat%'"
    ).fetchone()
    return int(row[0]) if row else 0


def measure(
    conn: psycopg.Connection[tuple[object, ...]],
    fleet: list[int],
    window: float,
    client: Client | None,
    rate: float,
) -> dict[str, float]:
    """DB CPU %, worker CPU %, transactions/s over ``window`` (enqueueing at ``rate`` if a client)."""
    servers = server_pids(conn)
    db0, w0, c0, t0 = cpu_seconds(servers), cpu_seconds(fleet), statements(conn), time.monotonic()
    enqueued = 0
    while (elapsed := time.monotonic() - t0) < window:
        if client is not None and enqueued < elapsed * rate:
            client.enqueue("bench.noop", queue=QUEUE)
            enqueued += 1
        time.sleep(0.005 if client is not None else 0.5)
    span = time.monotonic() - t0
    return {
        "db_cpu_pct": 100 * (cpu_seconds(servers) - db0) / span,
        "workers_cpu_pct": 100 * (cpu_seconds(fleet) - w0) / span,
        "xact_per_s": (statements(conn) - c0 - enqueued) / span,
        "jobs": enqueued,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="200", help="fleet sizes, comma-separated")
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=10.0, help="jobs/s in the trickle phase")
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument(
        "--ab",
        default="",
        metavar="OTHER_BIN",
        help="A/B: also run the queue-claim-worker at this path (an older build), alternated",
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds (alternated with --ab)")
    args = parser.parse_args()
    builds = [("this build", WORKER_BIN)] + ([("other build", Path(args.ab))] if args.ab else [])
    sizes = [int(x) for x in args.workers.split(",")]
    with big_server(max(sizes) * 2 + 50) as admin:
        with psycopg.connect(admin) as c:
            print(
                f"# server {c.execute('SHOW server_version').fetchone()[0]}, "
                f"poll {os.environ.get('QUEUE_ENGINE_POLL_S', '1.0')} s, "
                f"heartbeat {os.environ.get('QUEUE_ENGINE_HEARTBEAT_S', '10')} s"
            )
        print(
            "| build | workers | phase | DB CPU, % of one core | workers' CPU, % of one core "
            "| statements/s (fleet) | per job |"
        )
        print("|---|---|---|---|---|---|---|")
        runs = [(n, b) for _ in range(args.rounds) for n in sizes for b in builds]
        for n, (label, path) in runs:
            with fresh_database(admin) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                procs = start_fleet(dsn, n, path)
                try:
                    wait_registered(conn, n, timeout=60 + n)
                    time.sleep(args.settle)
                    pids = [p.pid for p in procs]
                    idle = measure(conn, pids, args.window, None, 0)
                    print(
                        f"| {label} | {n} | idle | {idle['db_cpu_pct']:.2f} | "
                        f"{idle['workers_cpu_pct']:.2f} | {idle['xact_per_s']:.0f} | |",
                        flush=True,
                    )
                    if args.rate <= 0:
                        continue
                    with Client(dsn) as client:
                        busy = measure(conn, pids, args.window, client, args.rate)
                    per_job = busy["xact_per_s"] * args.window / max(busy["jobs"], 1)
                    print(
                        f"| {label} | {n} | {args.rate:g} jobs/s | {busy['db_cpu_pct']:.2f} | "
                        f"{busy['workers_cpu_pct']:.2f} | {busy['xact_per_s']:.0f} | "
                        f"{per_job:.1f} statements |",
                        flush=True,
                    )
                finally:
                    stop_workers(procs)


if __name__ == "__main__":
    main()
