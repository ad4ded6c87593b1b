"""The worker's finish-and-claim plan reaches jobs by index on a cold table (issue 16).

A worker prepares its statements once per connection, usually when the table is
still empty (it starts before the jobs arrive), and keeps the generic plan until
an ANALYZE or VACUUM invalidates it. On a never-analyzed table that plan used to
scan all of ``jobs`` to finish and to claim each job: a fresh database drained at
a quarter of the engine's speed. These tests read the plan the worker's session
(its real settings, :func:`store.configure_session`) uses for 10,000 queued jobs
the planner knows nothing about, and assert its shape, not a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import PgServer

from queue_engine import Client
from queue_engine.migrate import Migrator
from queue_engine.worker import store
from queue_engine.worker.store import ClaimGate

SCHEMA = "queue_engine"
QUEUE = "cold"
N_JOBS = 10_000


@pytest.fixture
def never_analyzed_dsn(pg_server: PgServer, empty_dsn: str) -> Iterator[str]:
    """A database migrated without the final ANALYZE: every table never analyzed."""
    Migrator(empty_dsn).up(analyze=False)
    yield empty_dsn


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _fill(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        client = Client(conn=conn)
        for _ in range(N_JOBS // 1000):
            client.enqueue_many([{"task": "noop", "queue": QUEUE}] * 1000)


def _worker_plan(
    dsn: str, *, warm_key: str | None, prepare_empty: bool
) -> tuple[list[dict[str, Any]], bool]:
    """EXPLAIN (FORMAT JSON) of the statement the worker's session prepared, and
    whether jobs was still never analyzed when it was explained."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        # No autovacuum may analyze or vacuum behind the test's back.
        admin.execute(f"ALTER TABLE {SCHEMA}.jobs SET (autovacuum_enabled = false)")
    with psycopg.connect(dsn, autocommit=True) as conn:
        store.configure_session(conn, synchronous_commit="on")
        gate = ClaimGate(host="h", warm_key=warm_key)
        if not prepare_empty:
            _fill(dsn)
        # The worker's first statement prepares it (psycopg prepare=True): the plan is made now.
        store.finish_and_claim(conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=0, gate=gate)
        if prepare_empty:
            _fill(dsn)
        claimed = store.finish_and_claim(
            conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=1, gate=gate
        ).claimed
        assert len(claimed) == 1
        # reltuples -1: never vacuumed nor analyzed (pg_class is copied with a template
        # database, the analyze counters are not).
        row = conn.execute(
            f"SELECT reltuples < 0 FROM pg_class WHERE oid = '{SCHEMA}.jobs'::regclass"
        ).fetchone()
        assert row is not None
        text = store.raw_statement(
            "finish_and_claim_jobs", SCHEMA, "cold" if warm_key is None else "warm"
        )
        found = conn.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement = %s", [text.text]
        ).fetchone()
        assert found is not None, "the worker's statement is not prepared"
        job = claimed[0]
        params = {
            "outcomes": json.dumps(
                [{"id": job.id, "attempt": job.attempt, "status": "succeeded", "kind": "done"}]
            ),
            "worker_id": "w",
            "queue": QUEUE,
            "claim_limit": 1,
            "lease_ttl_s": 60,
            "jobs_channel": f"{SCHEMA}.jobs",
            "host": "h",
            "slot": None,
            "warm_key": warm_key,
            "affinity_wait_s": 30.0,
        }
        values = [params[name] for name in text.names]
        marks = ", ".join(["%s"] * len(values))
        explained = (
            psycopg.ClientCursor(conn)
            .execute(f"EXPLAIN (FORMAT JSON) EXECUTE {found[0]}({marks})", values)
            .fetchone()
        )
        assert explained is not None
        return list(_nodes(explained[0][0]["Plan"])), bool(row[0])


@pytest.mark.parametrize("warm_key", [None, "model-a"], ids=["cold-variant", "warm-variant"])
@pytest.mark.parametrize("prepare_empty", [True, False], ids=["prepared-empty", "prepared-full"])
def test_claim_plan_uses_indexes_on_never_analyzed_table(
    never_analyzed_dsn: str, warm_key: str | None, prepare_empty: bool
) -> None:
    nodes, never_analyzed = _worker_plan(
        never_analyzed_dsn, warm_key=warm_key, prepare_empty=prepare_empty
    )
    assert never_analyzed
    on_jobs = [n for n in nodes if n.get("Relation Name") == "jobs"]
    seq = [n for n in on_jobs if n["Node Type"] == "Seq Scan"]
    assert not seq, f"sequential scan of jobs in the worker's plan: {seq}"
    indexes = {n.get("Index Name") for n in nodes}  # a bitmap index scan names no relation
    # The claim walks the partial claimable index; both UPDATEs reach rows by primary key.
    assert "jobs_claimable_idx" in indexes
    assert "jobs_pkey" in indexes
    updates = [n for n in on_jobs if n["Node Type"] == "ModifyTable"]
    assert len(updates) == 2  # finished and claimed


def test_claim_plan_uses_indexes_after_migration_analyze(dsn: str) -> None:
    """Migrator.up analyzes the (empty) tables: a plan made then must not believe them empty."""
    nodes, never_analyzed = _worker_plan(dsn, warm_key=None, prepare_empty=True)
    assert not never_analyzed
    seq = [n for n in nodes if n.get("Relation Name") == "jobs" and n["Node Type"] == "Seq Scan"]
    assert not seq, f"sequential scan of jobs in the worker's plan: {seq}"
