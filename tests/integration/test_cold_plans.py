"""The worker's finish-and-claim plan reaches jobs by index on a cold table (issue 16).

A worker prepares its statements once per connection, usually when the table is
still empty (it starts before the jobs arrive), and keeps the generic plan until
an ANALYZE or VACUUM invalidates it. On a never-analyzed table that plan used to
scan all of ``jobs`` to finish and to claim each job: a fresh database drained at
a quarter of the engine's speed. These tests read the plan the worker's session
(its real settings, :func:`store.configure_session`) uses for 10,000 queued jobs
the planner knows nothing about, and assert its shape, not a time. The same for
a fan-in's claim, which reads every parent's result: planned on the empty table,
that read was a scan of all of jobs per parent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import PgServer
from support.plans import plan_nodes, reads_all_of

from queue_engine import Client, Workflow
from queue_engine.foundation.migrate import Migrator
from queue_engine.foundation.sql import compiler
from queue_engine.worker import store
from queue_engine.worker.outcomes import Outcome
from queue_engine.worker.store import ClaimGate

SCHEMA = "queue_engine"
QUEUE = "cold"
N_JOBS = 10_000


@pytest.fixture
def never_analyzed_dsn(pg_server: PgServer, empty_dsn: str) -> Iterator[str]:
    """A database migrated without the final ANALYZE: every table never analyzed."""
    Migrator(empty_dsn).up(analyze=False)
    yield empty_dsn


def _params(
    *, outcomes: list[Outcome], claim_limit: int, warm_key: str | None = None
) -> dict[str, Any]:
    """The worker statement's parameters, as store.finish_and_claim sends them."""
    return store.statement_params(
        SCHEMA,
        worker_id="w",
        queue=QUEUE,
        outcomes=outcomes,
        claim_limit=claim_limit,
        lease_ttl_s=60,
        gate=ClaimGate(host="h", warm_key=warm_key),
    )


def _explain_prepared(
    conn: psycopg.Connection[tuple[Any, ...]],
    variant: str | tuple[str, ...],
    params: dict[str, Any],
    *,
    analyze: bool = False,
) -> list[dict[str, Any]]:
    """The plan nodes of the worker statement ``variant`` that this session
    prepared (its generic plan, kept since it was made)."""
    text = compiler.raw_statement("finish_and_claim_jobs", SCHEMA, variant)
    found = conn.execute(
        "SELECT name FROM pg_prepared_statements WHERE statement = %s", [text.text]
    ).fetchone()
    assert found is not None, f"the worker's statement {variant} is not prepared"
    values = [params[name] for name in text.names]
    marks = ", ".join(["%s"] * len(values))
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    explained = (
        psycopg.ClientCursor(conn)
        .execute(f"EXPLAIN ({options}) EXECUTE {found[0]}({marks})", values)
        .fetchone()
    )
    assert explained is not None
    return list(plan_nodes(explained[0][0]["Plan"]))


def _whole_scans_of_jobs(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes that read all of jobs."""
    return [n for n in nodes if reads_all_of(n, "jobs")]


def _fill(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        client = Client(conn=conn)
        for _ in range(N_JOBS // 1000):
            client.enqueue_many([{"task": "noop", "queue": QUEUE}] * 1000)


def _worker_plan(
    dsn: str, *, warm_key: str | None, prepare_empty: bool, claim_only: bool = False
) -> tuple[list[dict[str, Any]], bool]:
    """EXPLAIN (FORMAT JSON) of the statement the worker's session prepared, and
    whether jobs was still never analyzed when it was explained.

    ``claim_only``: the statement a worker sends with nothing to finish (its
    first, and every claim after an idle wait), instead of the one that also
    finishes a job."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        # No autovacuum may analyze or vacuum behind the test's back.
        admin.execute(f"ALTER TABLE {SCHEMA}.jobs SET (autovacuum_enabled = false)")
    with psycopg.connect(dsn, autocommit=True) as conn:
        store.configure_session(conn, synchronous_commit="on")
        gate = ClaimGate(host="h", warm_key=warm_key)
        if not prepare_empty:
            _fill(dsn)
        # The worker's first statements prepare them (psycopg prepare=True): the
        # plans are made now. With an empty queue the claim takes nothing.
        store.finish_and_claim(conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=0, gate=gate)
        # A prefetch-1 worker's statement, finish one job (none here) and claim
        # one, is planned now too (on a full table it takes a job).
        store.finish_and_claim(
            conn,
            SCHEMA,
            worker_id="w",
            queue=QUEUE,
            outcomes=[Outcome(0, 1, "succeeded", "done")],
            claim_limit=1,
            gate=gate,
        )
        if prepare_empty:
            got = store.finish_and_claim(
                conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=1, gate=gate
            )
            assert not got.claimed
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
        job = claimed[0]
        outcome = Outcome(job.id, job.attempt, "succeeded", "done")
        outcomes = [] if claim_only else [outcome]
        variant = store.worker_tags(len(outcomes), 1, warm_key)
        nodes = _explain_prepared(
            conn, variant, _params(outcomes=outcomes, claim_limit=1, warm_key=warm_key)
        )
        return nodes, bool(row[0])


@pytest.mark.parametrize("claim_only", [False, True], ids=["finish-and-claim", "claim-only"])
@pytest.mark.parametrize("warm_key", [None, "model-a"], ids=["cold-variant", "warm-variant"])
@pytest.mark.parametrize("prepare_empty", [True, False], ids=["prepared-empty", "prepared-full"])
def test_claim_plan_uses_indexes_on_never_analyzed_table(
    never_analyzed_dsn: str, warm_key: str | None, prepare_empty: bool, claim_only: bool
) -> None:
    nodes, never_analyzed = _worker_plan(
        never_analyzed_dsn, warm_key=warm_key, prepare_empty=prepare_empty, claim_only=claim_only
    )
    assert never_analyzed
    on_jobs = [n for n in nodes if n.get("Relation Name") == "jobs"]
    whole = _whole_scans_of_jobs(nodes)
    assert not whole, f"a scan of all of jobs in the worker's plan: {whole}"
    indexes = {n.get("Index Name") for n in nodes}  # a bitmap index scan names no relation
    # The claim walks the partial claimable index; both UPDATEs reach rows by primary key.
    assert "jobs_claimable_idx" in indexes
    assert "jobs_pkey" in indexes
    updates = [n for n in on_jobs if n["Node Type"] == "ModifyTable"]
    assert len(updates) == (1 if claim_only else 2)  # claimed; finished too


def test_claim_plan_uses_indexes_after_migration_analyze(dsn: str) -> None:
    """Migrator.up analyzes the (empty) tables: a plan made then must not believe them empty."""
    nodes, never_analyzed = _worker_plan(dsn, warm_key=None, prepare_empty=True)
    assert not never_analyzed
    whole = _whole_scans_of_jobs(nodes)
    assert not whole, f"a scan of all of jobs in the worker's plan: {whole}"


N_PARENTS = 200


def _fan_in_claim_plan(dsn: str, *, handover: bool) -> list[dict[str, Any]]:
    """EXPLAIN ANALYZE of the worker's statement that claims a fan-in's join
    after its N_PARENTS parents ended (``handover``: the statement that ends
    the last parent and takes the join over), with the plan the session made
    on the empty table.

    The join's claim gives its handler every parent's result: one lookup of
    jobs per parent. Planned on a table the planner believed empty, that lookup
    was a scan of all of jobs per parent (0.54 s for 3,000 parents).
    """
    with psycopg.connect(dsn, autocommit=True) as admin:
        for table in ("jobs", "job_deps"):
            admin.execute(f"ALTER TABLE {SCHEMA}.{table} SET (autovacuum_enabled = false)")
    with psycopg.connect(dsn, autocommit=True) as conn:
        store.configure_session(conn, synchronous_commit="on")
        gate = ClaimGate(host="h")
        # The worker's first statements prepare its variants while jobs is empty.
        store.finish_and_claim(conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=0, gate=gate)
        store.finish_and_claim(conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=1, gate=gate)
        nothing = Outcome(0, 1, "succeeded", "done", workflow_id=0)
        store.finish_and_claim(
            conn, SCHEMA, worker_id="w", queue=QUEUE, outcomes=[nothing], claim_limit=1, gate=gate
        )
        wf = Workflow("fan-in")
        parts = [wf.add(f"part-{i}", "noop", queue=QUEUE) for i in range(N_PARENTS)]
        wf.add("join", "noop", queue=QUEUE, after=parts)
        with Client(dsn) as client:
            client.start_workflow(wf)
        claimed = store.finish_and_claim(
            conn, SCHEMA, worker_id="w", queue=QUEUE, claim_limit=N_PARENTS, gate=gate
        ).claimed
        assert len(claimed) == N_PARENTS
        ends = [
            Outcome(j.id, j.attempt, "succeeded", "done", workflow_id=j.workflow_id)
            for j in claimed
        ]
        # Without the hand-over, the last parent's end queues the join at the
        # end of its statement, and the next statement claims it.
        last = ends[-1:] if handover else []
        store.finish_and_claim(
            conn,
            SCHEMA,
            worker_id="w",
            queue=QUEUE,
            outcomes=ends[: N_PARENTS - len(last)],
            gate=gate,
        )
        # Without outcomes the worker sends the claim alone (claimonly).
        tags = store.worker_tags(len(last), 1)
        variant = (*tags, "handover") if handover else tags
        nodes = _explain_prepared(
            conn, variant, _params(outcomes=last, claim_limit=1), analyze=True
        )
        join = conn.execute(f"SELECT status FROM {SCHEMA}.jobs WHERE node = 'join'").fetchone()
        assert join == ("running",), "the explained statement did not claim the join"
        return nodes


@pytest.mark.parametrize("handover", [False, True], ids=["claim", "handover"])
def test_fan_in_claim_reads_each_parent_by_id_on_a_young_table(
    never_analyzed_dsn: str, handover: bool
) -> None:
    nodes = _fan_in_claim_plan(never_analyzed_dsn, handover=handover)
    whole = _whole_scans_of_jobs(nodes)
    assert not whole, f"a scan of all of jobs in the worker's plan: {whole}"
    lookups = [
        n
        for n in nodes
        if n.get("Relation Name") == "jobs"
        and n.get("Index Name") == "jobs_pkey"
        and n["Actual Loops"] == N_PARENTS
    ]
    assert lookups, "the parents were not looked up by id, one loop each"
    assert all(n["Actual Rows"] == 1 for n in lookups)
    removed = sum(n.get("Rows Removed by Join Filter", 0) for n in nodes)
    assert removed == 0, f"{removed} rows of jobs read and thrown away"
