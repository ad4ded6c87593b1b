"""Wake latency of idle claim workers, split into its parts. Not a test: it prints numbers.

Usage::

    python bench/wake_latency.py                        # 2 idle workers, 500 jobs at 100/s, 3 rounds
    python bench/wake_latency.py --build base=/path/to/other/venv/bin/queue-claim-worker

As the shared harness's latency scenario: K idle ``queue-claim-worker``
processes (default 2), warmed up, idle for a second; this process enqueues
``--jobs`` jobs one at a time at ``--rate``/s (``Client.enqueue``, one
transaction each, durable: the producer's commit waits for its WAL flush),
each carrying ``t = time.time()`` taken just before the call, and the
handler returns ``time.time() - t`` at its first line. Each latency is split
into:

- ``enqueue``: the producer's call, until it returned (the INSERT, the commit
  and its WAL flush, the round trip): the job exists and its NOTIFY is sent
  only when this commit is done;
- ``wake to handler``: the rest, from the commit's return to the handler's
  first line (the NOTIFY's delivery, the worker waking, its claim statement,
  the worker's bookkeeping and the handler call).

With several ``--build LABEL=BIN`` the rounds alternate between the builds.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from queue_engine import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker_bench import (  # a sibling script, not a package
    QUEUE,
    WORKER_BIN,
    fresh_database,
    pct,
    start_workers,
    stop_workers,
    unfinished,
)


@contextmanager
def server(dsn: str) -> Iterator[str]:
    """An admin DSN: the given one, or an embedded server's with initdb's durable defaults."""
    if dsn:
        yield dsn
        return
    from queue_engine.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="qe-wake-"))
    pg = EmbeddedPostgres(folder / "data")
    try:
        yield pg.start()
    finally:
        pg.destroy()
        shutil.rmtree(folder, ignore_errors=True)


def measure(admin: str, binary: str, k: int, m: int, rate: float) -> dict[str, list[float]]:
    """One round: per job, total latency, enqueue call and the rest (seconds)."""
    enqueue_s: dict[int, float] = {}
    with fresh_database(admin) as dsn, Client(dsn) as client:
        procs = start_workers(dsn, k, 1, {}, binary)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for _ in range(20):  # warm-up: workers connected and listening
                    client.enqueue("noop", queue=QUEUE)
                deadline = time.monotonic() + 120
                while unfinished(conn) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(1.0)  # idle: every worker waits for a notification
                conn.execute("DELETE FROM queue_engine.jobs")
                next_at = time.monotonic()
                for _ in range(m):
                    next_at += 1.0 / rate
                    t0 = time.time()
                    job = client.enqueue("noop", queue=QUEUE, args={"t": t0})
                    enqueue_s[job.id] = time.time() - t0
                    pause = next_at - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                deadline = time.monotonic() + 60
                while unfinished(conn) and time.monotonic() < deadline:
                    time.sleep(0.05)
                rows = conn.execute(
                    "SELECT id, (result)::float8 FROM queue_engine.jobs WHERE status = 'succeeded'"
                ).fetchall()
        finally:
            stop_workers(procs)
    total = [float(r[1]) for r in rows]
    enq = [enqueue_s[int(r[0])] for r in rows]
    return {
        "total": total,
        "enqueue": enq,
        "wake": [t - e for t, e in zip(total, enq, strict=True)],
    }


def add_scenario_options(parser: argparse.ArgumentParser) -> None:
    """The harness's latency scenario as options (also ``latency_floor.py``'s)."""
    parser.add_argument("--dsn", default="")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_scenario_options(parser)
    parser.add_argument("--build", action="append", default=[], help="LABEL=BIN (repeatable)")
    opts = parser.parse_args()
    builds = [tuple(b.split("=", 1)) for b in opts.build] or [("this", str(WORKER_BIN))]
    results: dict[str, list[dict[str, list[float]]]] = {}
    with server(opts.dsn) as admin:
        for r in range(opts.rounds):
            for label, binary in builds if r % 2 == 0 else builds[::-1]:
                got = measure(admin, binary, opts.workers, opts.jobs, opts.rate)
                results.setdefault(label, []).append(got)
                ms = sorted(v * 1000 for v in got["total"])
                print(
                    f"  round {r + 1} {label}: p50 {pct(ms, 50):.2f} / p99 {pct(ms, 99):.2f} ms",
                    file=sys.stderr,
                )
    print(
        f"\nwake latency, {opts.jobs} jobs at {opts.rate:g}/s to {opts.workers} idle workers,"
        f" ms: median over {opts.rounds} rounds of each round's p50 / p95 / p99\n"
    )
    print("| build | part | p50 | p95 | p99 | rounds' p50 |")
    print("|---|---|---|---|---|---|")
    for label, rounds in results.items():
        for part in ("total", "enqueue", "wake"):
            cells = []
            for p in (50, 95, 99):
                cells.append(
                    statistics.median(pct(sorted(v * 1000 for v in rd[part]), p) for rd in rounds)
                )
            each = ", ".join(f"{pct(sorted(v * 1000 for v in rd[part]), 50):.2f}" for rd in rounds)
            name = {"total": "total", "enqueue": "enqueue call", "wake": "wake to handler"}[part]
            print(
                f"| {label} | {name} | {cells[0]:.2f} | {cells[1]:.2f} | {cells[2]:.2f} | {each} |"
            )


if __name__ == "__main__":
    main()
