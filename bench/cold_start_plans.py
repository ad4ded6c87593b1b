"""EXPLAIN (ANALYZE, BUFFERS) of the worker's finish-and-claim on a cold jobs table (issue 16).

Reproduces what a worker sees on a fresh database: it connects and prepares its
statement while ``jobs`` is empty and never analyzed, then 10,000 jobs arrive
in one commit. Prints, as Markdown, the plan the worker then executes for one
finish + claim:

1. with the session settings before the fix (``enable_seqscan`` on),
2. with the worker's session settings now (``store.configure_session``), no ANALYZE,
3. with the settings before the fix, after ``ANALYZE jobs`` (which invalidates
   the cached plan: what autovacuum eventually does).

Usage: ``python bench/cold_start_plans.py > bench/plans/cold_start.md.new``
(embedded Postgres with its default, durable settings).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psycopg

from queue_engine import Client
from queue_engine.embedded import EmbeddedPostgres
from queue_engine.migrate import Migrator
from queue_engine.sql import compiler
from queue_engine.worker import store
from queue_engine.worker.outcomes import Outcome

SCHEMA = "queue_engine"
QUEUE = "bench"
N_JOBS = 10_000


def explain(conn: psycopg.Connection[Any], job_id: int, attempt: int) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) the prepared statement for one finish + one claim, rolled back."""
    # A prefetch-1 worker's statement.
    statement = compiler.raw_statement("finish_and_claim_jobs", SCHEMA, store.worker_tags(1, 1))
    row = conn.execute(
        "SELECT name FROM pg_prepared_statements WHERE statement = %s", [statement.text]
    ).fetchone()
    assert row is not None
    params = store.statement_params(
        SCHEMA,
        worker_id="w",
        queue=QUEUE,
        outcomes=[Outcome(job_id, attempt, "succeeded", "succeeded", duration_ms=1)],
        claim_limit=1,
        lease_ttl_s=60,
        gate=store.ClaimGate(host="h"),
    )
    values = [params[name] for name in statement.names]
    marks = ", ".join(["%s"] * len(values))
    with conn.transaction(force_rollback=True):
        rows = (
            psycopg.ClientCursor(conn)
            .execute(f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE {row[0]}({marks})", values)
            .fetchall()
        )
    return "\n".join(r[0] for r in rows)


def scenario(dsn: str, *, fixed: bool, analyze_after: bool) -> str:
    """Prepare on the empty table, fill it, claim one job, and explain a finish + claim."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"TRUNCATE {SCHEMA}.jobs, {SCHEMA}.job_events")
    with psycopg.connect(dsn, autocommit=True) as conn:
        store.configure_session(conn, synchronous_commit="on")
        if not fixed:
            conn.execute("SET enable_seqscan = on")
        store.finish_and_claim(conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=0)
        # The statement a prefetch-1 worker sends for every job, planned now too:
        # it finishes one job (none here) and claims one (none yet).
        nothing = Outcome(0, 1, "succeeded", "succeeded")
        store.finish_and_claim(
            conn, SCHEMA, worker_id="w", queue=QUEUE, outcomes=[nothing], claim_limit=1
        )
        with psycopg.connect(dsn, autocommit=True) as producer, producer.transaction():
            client = Client(conn=producer)
            for _ in range(N_JOBS // 1000):
                client.enqueue_many([{"task": "bench.noop", "queue": QUEUE}] * 1000)
        if analyze_after:
            conn.execute(f"ANALYZE {SCHEMA}.jobs")
        job = store.finish_and_claim(
            conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=1
        ).claimed[0]
        return explain(conn, job.id, job.attempt)


def main() -> None:
    server = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="qe-plans-")) / "data")
    url = server.start()
    try:
        Migrator(url).up(analyze=False)
        with psycopg.connect(url, autocommit=True) as conn:
            # Nothing may analyze or vacuum the table behind the scenarios' back.
            conn.execute(f"ALTER TABLE {SCHEMA}.jobs SET (autovacuum_enabled = false)")
            version = conn.execute("SHOW server_version").fetchone()
        print(f"Postgres {version[0] if version else '?'}; {N_JOBS:,} queued jobs.\n")
        for title, fixed, analyzed in (
            # The analyzed scenario last: TRUNCATE keeps pg_statistic's rows.
            ("Before the fix: never analyzed, plan made on the empty table", False, False),
            ("After the fix: never analyzed, plan made on the empty table", True, False),
            ("Before the fix: after ANALYZE jobs (the cached plan is re-made)", False, True),
        ):
            print(f"## {title}\n\n```\n{scenario(url, fixed=fixed, analyze_after=analyzed)}\n```\n")
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
