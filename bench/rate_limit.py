"""Per-key rate limits under a backlog: the measured rate against the configured one.

Not a test: it prints a table. Usage::

    python bench/rate_limit.py                    # embedded Postgres, 4 workers, 60 s each
    python bench/rate_limit.py --workers 4 --window 60 --prefetch 1
    python bench/rate_limit.py --dsn postgresql://... --scenarios one,two

Each scenario starts ``--workers`` real ``queue-claim-worker`` processes on a
fresh database whose queue holds a backlog far larger than the window can
drain, with operators' rates on its concurrency keys (``rate_buckets``, as
``queue-ctl limits set KEY --rate R/s --burst B`` writes them):

- **one**: 5,000 jobs of one key at 20/s, burst 20;
- **two**: two keys at once, 20/s (burst 20) and 5/s (burst 5), 5,000 and
  2,000 jobs, shuffled;
- **weights**: one key at 20/s (burst 20), jobs of weight 1, 2 and 3 in turn
  (2 tokens a job on average: about 10 jobs/s).

After the first claim of a key it waits ``--skip`` seconds (the burst is
spent then; the bucket refills at its rate), then measures over ``--window``
seconds: the tokens taken (the weights of the jobs claimed, from their
``started_at``) divided by the window, against the configured rate. It also
counts the workers' statements (``pg_stat_statements``, calls in the window)
per second and per job claimed: a worker whose due jobs all wait for tokens
sleeps until the next token is due, so this stays a few per token (no spin).

On a shared 2-core machine the figures include other load: the rate is a
clock-bound target (it holds whatever the load, until the workers cannot
keep up), the statements per job are counts.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import psycopg
from lib.postgres import fresh_database, server
from lib.report import log, table
from lib.workers import QUEUE, start_workers, stop_workers

Conn = psycopg.Connection[tuple[Any, ...]]

#: name -> [(key, rate/s, burst, jobs, weights cycled)]
SCENARIOS: dict[str, list[tuple[str, float, int, int, tuple[int, ...]]]] = {
    "one": [("partner:a", 20.0, 20, 5_000, (1,))],
    "two": [("partner:a", 20.0, 20, 5_000, (1,)), ("partner:b", 5.0, 5, 2_000, (1,))],
    "weights": [("partner:w", 20.0, 20, 3_000, (1, 2, 3))],
}


def prepare(conn: Conn, keys: list[tuple[str, float, int, int, tuple[int, ...]]]) -> None:
    """The buckets (full) and the backlog, the keys' jobs interleaved."""
    for key, rate, burst, n, weights in keys:
        conn.execute(
            "INSERT INTO queue_engine.rate_buckets (key, rate, burst, tokens)"
            " VALUES (%s, %s, %s, %s)",
            (key, rate, burst, burst),
        )
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, args, concurrency_key, weight)"
            " SELECT %s, 'noop', '{}', %s, (%s::int[])[1 + (g %% cardinality(%s::int[]))]"
            " FROM generate_series(1, %s) g",
            (QUEUE, key, list(weights), list(weights), n),
        )
    # Interleave: a random order of available_at within the first second.
    conn.execute("UPDATE queue_engine.jobs SET available_at = now() - random() * interval '1 s'")
    conn.execute("ANALYZE queue_engine.jobs")


def first_claim(conn: Conn, timeout: float = 120) -> float:
    """Wait for the first claim; the database's clock then (epoch seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT extract(epoch FROM min(started_at))::float8 FROM queue_engine.jobs"
        ).fetchone()
        if row is not None and row[0] is not None:
            return float(row[0])
        time.sleep(0.05)
    raise SystemExit("no worker claimed anything: is the build installed?")


def statements(conn: Conn) -> int:
    """Calls of every statement in this database since the reset, this script's left out."""
    row = conn.execute(
        "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND query NOT ILIKE '%%pg_stat%%' AND query NOT ILIKE '%%rate_bench%%'"
    ).fetchone()
    return int(row[0]) if row else 0


def run(admin: str, name: str, args: argparse.Namespace) -> list[list[object]]:
    keys = SCENARIOS[name]
    rows: list[list[object]] = []
    with fresh_database(admin) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        prepare(conn, keys)
        procs = start_workers(dsn, args.workers, prefetch=args.prefetch)
        try:
            t0 = first_claim(conn)
            # Wait until the window starts (the database's clock), then reset the counts.
            now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
            assert now is not None
            time.sleep(max(0.0, t0 + args.skip - float(now[0])))
            conn.execute("SELECT pg_stat_statements_reset()")
            start_row = conn.execute(
                "SELECT extract(epoch FROM clock_timestamp())::float8 /* rate_bench */"
            ).fetchone()
            assert start_row is not None
            start = float(start_row[0])
            time.sleep(args.window)
            calls = statements(conn)
            end = start + args.window
        finally:
            stop_workers(procs)
        claimed_total = 0
        for key, rate, burst, _n, _w in keys:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(coalesce(weight, 1)), 0)"
                " FROM queue_engine.jobs WHERE concurrency_key = %s"
                " AND started_at >= to_timestamp(%s) AND started_at < to_timestamp(%s)",
                (key, start, end),
            ).fetchone()
            assert row is not None
            jobs, tokens = int(row[0]), int(row[1])
            claimed_total += jobs
            measured = tokens / args.window
            rows.append(
                [
                    name,
                    key,
                    f"{rate:g}/s (burst {burst})",
                    jobs,
                    tokens,
                    f"{measured:.2f}",
                    f"{100 * (measured - rate) / rate:+.1f} %",
                ]
            )
        per_s = calls / args.window
        per_job = calls / claimed_total if claimed_total else float("nan")
        for r in rows:
            r += [f"{per_s:.1f}", f"{per_s / args.workers:.1f}", f"{per_job:.2f}"]
        overrun = conn.execute(
            "SELECT count(*) FROM queue_engine.jobs WHERE status NOT IN ('queued', 'succeeded',"
            " 'running') OR attempt > 1"
        ).fetchone()
        if overrun and overrun[0]:
            log(f"{name}: {overrun[0]} jobs failed or retried (expected none)")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default="", help="an admin DSN (default: embedded Postgres)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--prefetch", type=int, default=1)
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--skip", type=float, default=2.0, help="seconds skipped (the burst)")
    parser.add_argument("--scenarios", default="one,two,weights")
    args = parser.parse_args()
    names = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown:
        sys.exit(f"unknown scenario(s) {unknown}: use {', '.join(SCENARIOS)}")
    settings = {"shared_preload_libraries": "pg_stat_statements"}
    results: list[list[object]] = []
    with server(args.dsn, settings=settings) as admin:
        for name in names:
            log(f"scenario {name}: {args.workers} workers, {args.window:g} s window")
            results += run(admin, name, args)
    print(
        f"\n{args.workers} workers (prefetch {args.prefetch}), window {args.window:g} s"
        f" after {args.skip:g} s:"
    )
    table(
        [
            "scenario",
            "key",
            "configured",
            "jobs",
            "tokens",
            "tokens/s",
            "vs configured",
            "stmts/s (all workers)",
            "stmts/s per worker",
            "stmts per job",
        ],
        results,
    )


if __name__ == "__main__":
    main()
