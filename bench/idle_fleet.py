"""What an idle fleet costs the database. Not a test: it prints numbers.

Usage::

    python bench/idle_fleet.py                       # 200 idle workers, embedded Postgres
    python bench/idle_fleet.py --workers 100,200 --window 30 --rate 5 --delayed 10
    python bench/idle_fleet.py --workers 200 --ab /path/to/old/.venv/bin/queue-claim-worker --rounds 3

For each fleet size: start that many ``queue-claim-worker`` processes on one
queue, wait until every one has registered and a few seconds more, then
measure over ``--window`` seconds

- **idle**: no jobs at all.
- **delayed**: ``--delayed`` jobs enqueued before the window with a
  ``run_at`` spread over it: nobody enqueues anything when they become due,
  so their pick-up delay (``started_at - available_at``) is what the safety
  poll gives.
- **trickle**: ``--rate`` jobs per second enqueued one at a time: each job's
  NOTIFY shows what the fan-out of one wake-up costs (statements per job), and
  ``started_at - created_at`` its pick-up delay.

Per phase: the database's CPU (user + system seconds of every server process,
from ``/proc``, over the window) as a percentage of one core, split into the
fleet's own backends and the rest (background processes, this script's
session); the workers' own CPU (total and per worker); the server sessions;
the statements per second by kind (``pg_stat_statements`` calls and their
execution time, this script's own left out).

CPU seconds are counted, not wall time, so other load on the machine moves
the figures less than it moves throughput, but a 2-core machine under load
still inflates them somewhat: compare figures from one run (``--ab``
alternates the builds round by round).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import time
from datetime import timedelta
from typing import Any

import psycopg
from lib.builds import Build, alternated
from lib.postgres import fresh_database, server, server_pids
from lib.timing import cpu_seconds, pct
from lib.workers import QUEUE, start_workers, stop_workers

from queue_engine import Client

Conn = psycopg.Connection[tuple[Any, ...]]

#: Statement kinds, by a pattern of their text (first match wins).
KINDS = [
    ("heartbeat", re.compile(r"UPDATE \S*workers SET\s+heartbeat_at", re.S)),
    ("probe", re.compile(r"SELECT EXISTS \(\s+SELECT \S+ FROM \S*jobs j", re.S)),
    ("claim", re.compile(r"claimable|finish|WITH\s+gate\s+AS", re.I)),
    ("controls", re.compile(r"AS stop_requested", re.S)),
    ("listen", re.compile(r"^(LISTEN|UNLISTEN)", re.S)),
    ("lock", re.compile(r"pg_(try_)?advisory", re.S)),
    ("enqueue", re.compile(r"INSERT INTO \S*jobs", re.S)),
]


def kind_of(query: str) -> str:
    """The statement's kind (see KINDS), else the start of its text."""
    for name, pattern in KINDS:
        if pattern.search(query):
            return name
    return "other: " + " ".join(query.split())[:40]


def wait_registered(conn: Conn, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM queue_engine.workers WHERE role = 'worker' AND stopped_at IS NULL"
        ).fetchone()
        if row and int(row[0]) >= n:
            return
        time.sleep(0.5)
    raise SystemExit(f"only some of {n} workers registered within {timeout:.0f}s")


def server_processes(conn: Conn) -> tuple[list[int], list[int], int]:
    """(pids of the fleet's backends, pids of every other server process, sessions)."""
    everyone = server_pids(conn)
    fleet = {
        int(r[0])
        for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'queue-claim-worker'"
        ).fetchall()
    }
    sessions = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
    ).fetchone()
    rest = [p for p in everyone if p not in fleet]
    return sorted(fleet), rest, int(sessions[0]) if sessions else 0


def statement_kinds(conn: Conn) -> dict[str, tuple[int, float]]:
    """{kind: (calls, exec ms)} in this database since the last reset, this script's left out."""
    rows = conn.execute(
        "SELECT query, calls, total_exec_time FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND query NOT ILIKE '%pg_stat%'"
    ).fetchall()
    out: dict[str, tuple[int, float]] = {}
    for query, calls, ms in rows:
        k = kind_of(str(query))
        c0, m0 = out.get(k, (0, 0.0))
        out[k] = (c0 + int(calls), m0 + float(ms))
    return out


def measure(
    conn: Conn,
    fleet: list[int],
    window: float,
    client: Client | None,
    rate: float,
    delayed: int = 0,
) -> dict[str, Any]:
    """One phase over ``window`` seconds: CPU, sessions, statements by kind, pick-up delays."""
    backends, rest, sessions = server_processes(conn)
    delayed_ids: list[int] = []
    if delayed and client is not None:
        # Due at random moments inside the window (after a margin for the enqueue).
        for _ in range(delayed):
            job = client.enqueue(
                "noop", queue=QUEUE, delay=timedelta(seconds=random.uniform(1, window - 2))
            )
            delayed_ids.append(job.id)
    conn.execute("SELECT pg_stat_statements_reset()")
    b0, r0, w0 = cpu_seconds(backends), cpu_seconds(rest), cpu_seconds(fleet)
    t0 = time.monotonic()
    trickle = client is not None and rate > 0
    enqueued: list[int] = []
    while (elapsed := time.monotonic() - t0) < window:
        if trickle and client is not None and len(enqueued) < elapsed * rate:
            enqueued.append(client.enqueue("noop", queue=QUEUE).id)
        time.sleep(0.005 if trickle else 0.25)
    span = time.monotonic() - t0
    b1, r1, w1 = cpu_seconds(backends), cpu_seconds(rest), cpu_seconds(fleet)
    kinds = statement_kinds(conn)
    if trickle:
        kinds.pop("enqueue", None)
    time.sleep(1.0)  # the last jobs start
    delays = [
        float(r[0])
        for r in conn.execute(
            "SELECT extract(epoch FROM started_at - greatest(created_at, available_at)) * 1000"
            " FROM queue_engine.jobs WHERE id = ANY(%s) AND started_at IS NOT NULL",
            [enqueued or delayed_ids],
        ).fetchall()
    ]
    missed = len(enqueued or delayed_ids) - len(delays)
    return {
        "db_cpu_pct": 100 * ((b1 - b0) + (r1 - r0)) / span,
        "fleet_backends_pct": 100 * (b1 - b0) / span,
        "other_server_pct": 100 * (r1 - r0) / span,
        "workers_cpu_pct": 100 * (w1 - w0) / span,
        "sessions": sessions,
        "kinds": {k: (c / span, ms / span) for k, (c, ms) in kinds.items()},
        "stmt_per_s": sum(c for c, _ in kinds.values()) / span,
        "jobs": len(enqueued),
        "delays_ms": delays,
        "missed": missed,
    }


def describe_kinds(kinds: dict[str, tuple[float, float]]) -> str:
    """``heartbeat 20.0/s (1.2 ms/s), ...`` ordered by calls."""
    parts = sorted(kinds.items(), key=lambda kv: -kv[1][0])
    return ", ".join(f"{k} {c:.1f}/s ({ms:.2f} ms/s)" for k, (c, ms) in parts if c >= 0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="200", help="fleet sizes, comma-separated")
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=5.0, help="jobs/s in the trickle phase")
    parser.add_argument(
        "--delayed", type=int, default=10, help="delayed jobs coming due in the idle window"
    )
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument(
        "--ab",
        default="",
        metavar="OTHER_BIN",
        help="A/B: also run the queue-claim-worker at this path (an older build), alternated",
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds (alternated with --ab)")
    args = parser.parse_args()
    builds = [Build.this("new")] + ([Build("old", args.ab)] if args.ab else [])
    sizes = [int(x) for x in args.workers.split(",")]
    results: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    settings = {"shared_preload_libraries": "pg_stat_statements"}
    with server(settings=settings, max_connections=max(sizes) + 60) as admin:
        with psycopg.connect(admin) as c:
            print(
                f"# server {c.execute('SHOW server_version').fetchone()[0]}, "  # type: ignore[index]
                f"env poll {os.environ.get('QUEUE_ENGINE_POLL_S', 'default')}, "
                f"heartbeat {os.environ.get('QUEUE_ENGINE_HEARTBEAT_S', 'default')}"
            )
        print(
            "| round | build | workers | phase | DB CPU % (fleet backends + rest) "
            "| workers' CPU % (per worker) | sessions | statements/s | per job "
            "| pick-up ms p50 / p99 / max |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for rnd in range(1, args.rounds + 1):
            for n in sizes:
                for build in alternated(builds, rnd - 1):
                    label = build.label
                    with (
                        fresh_database(admin) as dsn,
                        psycopg.connect(dsn, autocommit=True) as conn,
                    ):
                        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                        procs = start_workers(dsn, n, worker_bin=build.script("queue-claim-worker"))
                        try:
                            wait_registered(conn, n, timeout=120 + 3 * n)
                            time.sleep(args.settle)
                            pids = [p.pid for p in procs]
                            phases = [("idle", 0.0)]
                            phases += [("delayed", 0.0)] if args.delayed > 0 else []
                            phases += [("trickle", args.rate)] if args.rate > 0 else []
                            with Client(dsn) as client:
                                for phase, rate in phases:
                                    m = measure(
                                        conn,
                                        pids,
                                        args.window,
                                        client,
                                        rate,
                                        delayed=args.delayed if phase == "delayed" else 0,
                                    )
                                    results.setdefault((label, n, phase), []).append(m)
                                    report(rnd, label, n, phase, m, args.window)
                        finally:
                            stop_workers(procs)
        print()
        print("medians:")
        for (label, n, phase), ms in results.items():
            med = statistics.median
            delays = [d for m in ms for d in m["delays_ms"]]
            print(
                f"  {label} {n} {phase}: DB CPU {med(m['db_cpu_pct'] for m in ms):.2f} % "
                f"(fleet backends {med(m['fleet_backends_pct'] for m in ms):.2f}), "
                f"workers {med(m['workers_cpu_pct'] for m in ms):.1f} %, "
                f"statements {med(m['stmt_per_s'] for m in ms):.1f}/s, "
                f"pick-up p50 {pct(sorted(delays), 50):.0f} p99 {pct(sorted(delays), 99):.0f} "
                f"max {max(delays, default=float('nan')):.0f} ms, "
                f"missed {sum(m['missed'] for m in ms)}"
            )


def report(rnd: int, label: str, n: int, phase: str, m: dict[str, Any], window: float) -> None:
    per_job = f"{m['stmt_per_s'] * window / m['jobs']:.1f}" if m["jobs"] else ""
    d = m["delays_ms"]
    picked = (
        f"{pct(sorted(d), 50):.0f} / {pct(sorted(d), 99):.0f} / {max(d):.0f} (n={len(d)}, missed {m['missed']})"
        if d
        else f"(missed {m['missed']})"
    )
    name = phase if phase != "trickle" else f"{m['jobs'] / window:g} jobs/s"
    print(
        f"| {rnd} | {label} | {n} | {name} | {m['db_cpu_pct']:.2f} "
        f"({m['fleet_backends_pct']:.2f} + {m['other_server_pct']:.2f}) "
        f"| {m['workers_cpu_pct']:.1f} ({m['workers_cpu_pct'] / n:.2f}) | {m['sessions']} "
        f"| {m['stmt_per_s']:.1f} | {per_job} | {picked} |",
        flush=True,
    )
    print(f"|   | kinds: {describe_kinds(m['kinds'])} |", flush=True)


if __name__ == "__main__":
    main()
