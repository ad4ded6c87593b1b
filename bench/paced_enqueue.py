"""The producer's paced single enqueue, two builds alternated. Not a test: it prints numbers.

Usage::

    python bench/paced_enqueue.py --base ../base/.venv/bin/python --rounds 8

The shared harness's latency scenario enqueues one job every 10 ms, and most
of a job's latency there is the producer's ``enqueue`` call itself (its
INSERT, its durable commit, the round trip: 1.1-1.4 ms of 1.8-2.2,
``cold_claim.py``). Paced calls run with the producer's caches cold, so they
are slower than back to back (``enqueue_bench.py``) and weigh the client's
Python differently. This puts two idle ``queue-claim-worker`` processes of
this build on one embedded server (fsync on) and, in rounds alternated ABBA,
runs a producer child process of each build: ``--jobs`` calls of
``Client(dsn).enqueue("noop", queue="bench", args={"t": time.time()})`` at
``--rate`` per second (the harness's call and pace), each call timed alone.
It prints each round's p50 and p90 and their medians per build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from lib.builds import Build, alternated
from lib.postgres import fresh_database, server
from lib.report import table
from lib.timing import pct
from lib.workers import start_workers, stop_workers


def child(dsn: str, jobs: int, rate: float) -> None:
    """Enqueue ``jobs`` jobs at ``rate``/s with this interpreter's build; print p50 and p90 ms."""
    from queue_engine import Client

    calls: list[float] = []
    with Client(dsn) as client:
        for _ in range(20):  # the pool, the prepared statement, the kept validation
            client.enqueue("noop", queue="bench", args={"t": time.time()})
        time.sleep(0.5)
        start = time.perf_counter()
        for i in range(jobs):
            due = start + i / rate
            while (now := time.perf_counter()) < due:
                time.sleep(min(0.002, due - now))
            t0 = time.perf_counter()
            client.enqueue("noop", queue="bench", args={"t": time.time()})
            calls.append(time.perf_counter() - t0)
    calls.sort()
    print(json.dumps({"p50": 1e3 * pct(calls, 50), "p90": 1e3 * pct(calls, 90)}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=False, help="the base build's venv python")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--dsn", default="", help="an admin DSN (default: an embedded Postgres)")
    parser.add_argument("--child", metavar="DSN", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.child, options.jobs, options.rate)
        return 0
    builds = [Build.this("new")] + ([Build("base", options.base)] if options.base else [])
    results: dict[str, list[dict[str, float]]] = {build.label: [] for build in builds}
    with server(options.dsn) as admin, fresh_database(admin) as dsn:
        workers = start_workers(dsn, 2)
        try:
            time.sleep(2)  # started, listening, idle
            for rnd in range(options.rounds):
                for build in alternated(builds, rnd):
                    name = build.label
                    out = subprocess.run(
                        [
                            *(build.python, __file__, "--child", dsn),
                            *("--jobs", str(options.jobs), "--rate", str(options.rate)),
                        ],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    result = json.loads(out.stdout.strip().splitlines()[-1])
                    results[name].append(result)
                    print(
                        f"round {rnd + 1} {name:<4} p50 {result['p50']:.3f} ms"
                        f"  p90 {result['p90']:.3f} ms",
                        flush=True,
                    )
        finally:
            stop_workers(workers)
    print(f"\npaced enqueue call, {options.jobs} jobs at {options.rate:g}/s, 2 idle workers")
    table(
        ["build", "p50 ms (median of rounds)", "p90 ms"],
        (
            [name, *(f"{statistics.median(r[p] for r in rows):.3f}" for p in ("p50", "p90"))]
            for name, rows in results.items()
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
