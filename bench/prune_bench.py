"""Retention under churn: table/index sizes and claim time while jobs are processed and pruned.

Not a test: it prints numbers. Usage::

    python bench/prune_bench.py                       # 1,000,000 jobs in 10 rounds, embedded Postgres
    python bench/prune_bench.py --jobs 200000 --rounds 5
    python bench/prune_bench.py --dsn postgresql://postgres@localhost/postgres

Each round enqueues ``jobs / rounds`` jobs into queue ``q`` in bulk, "processes"
them with SQL in transactions of ``--chunk`` jobs (queued -> running ->
succeeded through the transition guard, two ``job_events`` rows per job, the
finish stamped 8 days ago so the default 7-day retention applies), then runs
the pruner (``prune_once``, batches of 1,000) until nothing expired is left.
After every round it prints the size of ``jobs`` (heap, and every index),
``job_events`` and the claim query's execution time (``EXPLAIN ANALYZE`` of
the claim shape, median of 5, rolled back), against a standing backlog of
``--backlog`` queued jobs that are never claimed (priority 500, so the
processed jobs, priority 100, sit in front of them in the claim index, as they
would in production). Workers are not run: the point is what the tables look
like after a million jobs went through them, not the job rate.

Without ``--dsn`` an embedded Postgres is started in a temp folder with the
server's default settings except ``autovacuum_naptime = 5s`` (docs/operations.md
recommends a short naptime for queue tables); with ``--dsn`` the DSN is an admin
connection and the script creates and drops one database.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import psycopg
from lib.postgres import fresh_database, server

from queue_engine.orchestrator.pruner import Retention, prune_once

CLAIM = (
    "EXPLAIN (ANALYZE, FORMAT JSON) "
    "SELECT id FROM queue_engine.jobs WHERE queue = 'q' AND status = 'queued' "
    "AND available_at <= now() ORDER BY priority, available_at, id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)
SIZES = """
SELECT 'jobs (total)', pg_total_relation_size('queue_engine.jobs')
UNION ALL SELECT 'jobs (heap)', pg_relation_size('queue_engine.jobs')
UNION ALL
SELECT '  ' || c.relname, pg_relation_size(c.oid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'queue_engine.jobs'::regclass
UNION ALL SELECT 'job_events (total)', pg_total_relation_size('queue_engine.job_events')
"""


def enqueue(conn: psycopg.Connection[Any], n: int, priority: int) -> tuple[int, int]:
    """Insert ``n`` jobs into queue q in one statement; return the id range."""
    row = conn.execute(
        "WITH ins AS (INSERT INTO queue_engine.jobs (queue, task, priority, args) "
        "SELECT 'q', 'bench.noop', %s, jsonb_build_object('n', g) "
        "FROM generate_series(1, %s) g RETURNING id) SELECT min(id), max(id) FROM ins",
        (priority, n),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def process(conn: psycopg.Connection[Any], first: int, last: int, chunk: int) -> None:
    """Claim and finish jobs first..last by SQL, ``chunk`` per transaction, with their events."""
    for lo in range(first, last + 1, chunk):
        hi = min(lo + chunk - 1, last)
        with conn.transaction():
            conn.execute(
                "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, "
                "claimed_by = 'bench', started_at = now() - interval '8 days 1 second', "
                "lease_expires_at = now() + interval '1 minute' "
                "WHERE id BETWEEN %s AND %s AND status = 'queued'",
                (lo, hi),
            )
            conn.execute(
                "INSERT INTO queue_engine.job_events (job_id, kind, from_status, to_status, "
                "attempt, worker_id) SELECT g, k, 'queued', 'running', 1, 'bench' "
                "FROM generate_series(%s::bigint, %s::bigint) g, "
                "unnest(ARRAY['claimed', 'succeeded']) k",
                (lo, hi),
            )
            conn.execute(
                "UPDATE queue_engine.jobs SET status = 'succeeded', "
                "finished_at = now() - interval '8 days', duration_ms = 1000, "
                "result = '{\"ok\": true}', lease_expires_at = NULL "
                "WHERE id BETWEEN %s AND %s AND status = 'running'",
                (lo, hi),
            )


def claim_ms(conn: psycopg.Connection[Any], repeat: int = 5) -> float:
    """Median execution time of the claim shape (rolled back: nothing is claimed)."""
    times = []
    for _ in range(repeat):
        with conn.transaction(force_rollback=True):
            row = conn.execute(CLAIM).fetchone()
            assert row is not None
            plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
            times.append(float(plan[0]["Execution Time"]))
    return statistics.median(times)


def vacuum_counts(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(autovacuum_count of jobs, of job_events) from pg_stat_user_tables."""
    row = conn.execute(
        "SELECT sum(autovacuum_count) FILTER (WHERE relname = 'jobs'), "
        "sum(autovacuum_count) FILTER (WHERE relname = 'job_events') "
        "FROM pg_stat_user_tables WHERE schemaname = 'queue_engine'"
    ).fetchone()
    assert row is not None
    return int(row[0] or 0), int(row[1] or 0)


def settle(conn: psycopg.Connection[Any], mode: str, timeout_s: float) -> float:
    """Let vacuum reclaim the pruned rows: wait for autovacuum of both tables, or run VACUUM."""
    t0 = time.perf_counter()
    if mode == "manual":
        conn.execute("VACUUM queue_engine.jobs")
        conn.execute("VACUUM queue_engine.job_events")
    elif mode == "auto":
        start = vacuum_counts(conn)
        while time.perf_counter() - t0 < timeout_s:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            now = vacuum_counts(conn)
            if now[0] > start[0] and now[1] > start[1]:
                break
            time.sleep(0.5)
    return time.perf_counter() - t0


def sizes(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return {name: int(size) for name, size in conn.execute(SIZES).fetchall()}


def mb(value: int) -> str:
    return f"{value / 1024 / 1024:8.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("QUEUE_ENGINE_DSN", ""))
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs processed in total")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=10_000, help="jobs per processing txn")
    parser.add_argument("--backlog", type=int, default=10_000, help="standing queued jobs")
    parser.add_argument(
        "--vacuum",
        choices=["auto", "manual", "none"],
        default="auto",
        help="after pruning: wait for autovacuum of both tables (auto), run VACUUM (manual), "
        "or go on at once (none)",
    )
    parser.add_argument("--vacuum-timeout", type=float, default=60.0)
    args = parser.parse_args()
    per_round = args.jobs // args.rounds

    with (
        server(args.dsn, settings={"autovacuum_naptime": "5s"}) as admin,
        fresh_database(admin) as dsn,
    ):
        conn = psycopg.connect(dsn, autocommit=True)
        version = conn.execute("SHOW server_version").fetchone()
        naptime = conn.execute("SHOW autovacuum_naptime").fetchone()
        print(
            f"PostgreSQL {version[0] if version else '?'}, autovacuum_naptime "
            f"{naptime[0] if naptime else '?'}; {args.jobs:,} jobs in {args.rounds} rounds "
            f"of {per_round:,}; standing backlog {args.backlog:,} queued jobs; vacuum {args.vacuum}"
        )
        enqueue(conn, args.backlog, priority=500)
        conn.execute("ANALYZE queue_engine.jobs")
        before = sizes(conn)
        rows: list[dict[str, Any]] = [
            {"round": 0, "sizes": before, "claim_ms": claim_ms(conn), "pruned": 0, "secs": {}}
        ]
        for rnd in range(1, args.rounds + 1):
            t0 = time.perf_counter()
            first, last = enqueue(conn, per_round, priority=100)
            t1 = time.perf_counter()
            process(conn, first, last, args.chunk)
            t2 = time.perf_counter()
            pruned = 0
            batches = 0
            while True:
                result = prune_once(conn, "queue_engine", Retention(), max_batches=100)
                pruned += result.jobs_total
                batches += result.batches
                if not result.more:
                    break
            t3 = time.perf_counter()
            waited = settle(conn, args.vacuum, args.vacuum_timeout)
            rows.append(
                {
                    "round": rnd,
                    "sizes": sizes(conn),
                    "claim_ms": claim_ms(conn),
                    "pruned": pruned,
                    "batches": batches,
                    "secs": {
                        "enqueue": t1 - t0,
                        "process": t2 - t1,
                        "prune": t3 - t2,
                        "vacuum": waited,
                    },
                }
            )
            r = rows[-1]
            print(
                f"round {rnd:2d}: enqueue {r['secs']['enqueue']:5.1f}s  "
                f"process {r['secs']['process']:5.1f}s  prune {r['secs']['prune']:5.1f}s "
                f"({pruned:,} jobs, {batches} batches)  vacuum {r['secs']['vacuum']:4.1f}s  claim {r['claim_ms']:.3f} ms  "
                f"jobs {mb(r['sizes']['jobs (total)']).strip()} MB  "
                f"events {mb(r['sizes']['job_events (total)']).strip()} MB",
                flush=True,
            )
        remaining = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
        print(f"\njobs left in the table: {remaining[0] if remaining else '?':,} (the backlog)")
        names = list(before)
        shown = sorted({0, 1, len(rows) // 2, len(rows) - 1})
        print(f"\n{'size (MB) after round':<40}" + "".join(f"{i:>10}" for i in shown))
        for name in names:
            print(
                f"{name:<40}" + "".join(f"{mb(rows[i]['sizes'].get(name, 0)):>10}" for i in shown)
            )
        print(f"{'claim EXPLAIN ANALYZE (ms, median of 5)':<40}", end="")
        print("".join(f"{rows[i]['claim_ms']:>10.3f}" for i in shown))
        conn.close()


if __name__ == "__main__":
    main()
