"""The statements a node's end runs inside Postgres keep index plans on a young table.

A worker session plans with ``plan_cache_mode = force_generic_plan`` and
``enable_seqscan = off`` (``store.configure_session``), and so do the
functions its finish statement calls through the workflow trigger: the
release of a node's children (``workflow_release_hits``), the cancel of a
failed node's descendants (``workflow_doom``) and the trigger's statement for
a node with several children. Each keeps the plan it made the first time it
ran in the session, often on a small table. Such a plan joined the children
to ``jobs`` by reading all of ``jobs`` for each child (an index scan with no
condition under a nested loop): a 3,000-part fan-out's release took 1.7 s.

These tests run a small workflow first (the plans are made then), then a
wide one, and read every nested statement's plan as Postgres ran it
(``auto_explain``, sent to the session as notices), asserting its shape: no
whole scan of ``jobs``, no rows read and thrown away by a join.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from support.plans import plan_nodes, reads_all_of

from queue_engine import Client, Workflow
from queue_engine.worker import store
from queue_engine.worker.outcomes import Outcome
from queue_engine.worker.store import ClaimGate

SCHEMA = "queue_engine"
QUEUE = "young"
WIDE = 300


class Session:
    """A worker's session, with every statement's plan collected as it runs."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.conn = conn
        self.gate = ClaimGate(host="h")
        self.plans: list[tuple[str, list[dict[str, Any]]]] = []
        conn.add_notice_handler(self._notice)
        store.configure_session(conn, synchronous_commit="on")
        conn.execute("LOAD 'auto_explain'")
        for setting, value in (
            ("log_min_duration", "0"),
            ("log_nested_statements", "on"),
            ("log_analyze", "on"),
            ("log_format", "json"),
            ("log_level", "notice"),
        ):
            conn.execute(f"SET auto_explain.{setting} = {value}")

    def _notice(self, diag: psycopg.errors.Diagnostic) -> None:
        text = diag.message_primary or ""
        if "plan:" not in text:
            return
        explained = json.loads(text.split("plan:", 1)[1])
        self.plans.append((explained["Query Text"], list(plan_nodes(explained["Plan"]))))

    def run(self, outcomes: list[Outcome], claim_limit: int) -> list[Any]:
        return store.finish_and_claim(
            self.conn,
            SCHEMA,
            worker_id="w",
            queue=QUEUE,
            outcomes=outcomes,
            claim_limit=claim_limit,
            gate=self.gate,
            handover=False,
        ).claimed

    def end(self, status: str, limit: int) -> None:
        """Claim up to ``limit`` jobs and end them all with ``status``."""
        claimed = self.run([], limit)
        assert claimed, "nothing to claim"
        ends = [
            Outcome(j.id, j.attempt, status, status, workflow_id=j.workflow_id) for j in claimed
        ]
        self.run(ends, 0)


def _fan(name: str, parts: int) -> Workflow:
    """root -> parts -> a leaf under each part (what a failed root's cancel
    walks down to). Only the root is in the session's queue: the next claim
    takes the next workflow's root, not these parts."""
    wf = Workflow(name)
    root = wf.add("root", "noop", queue=QUEUE)
    nodes = [wf.add(f"part-{i}", "noop", queue="elsewhere", after=[root]) for i in range(parts)]
    for i, part in enumerate(nodes):
        wf.add(f"leaf-{i}", "noop", queue="elsewhere", after=[part])
    return wf


def _bad_reads(plans: list[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """Each plan node that read all of jobs, or a join that threw rows away."""
    bad = []
    for query, nodes in plans:
        for n in nodes:
            whole = reads_all_of(n, "jobs")
            removed = n.get("Rows Removed by Join Filter", 0)
            if whole or removed >= WIDE:
                first = " ".join(query.split())[:80]
                bad.append(f"{n['Node Type']} (removed {removed}) in: {first}")
    return bad


@pytest.fixture
def session(dsn: str) -> Iterator[Session]:
    with psycopg.connect(dsn, autocommit=True) as admin:
        for table in ("jobs", "job_deps", "job_gates"):
            admin.execute(f"ALTER TABLE {SCHEMA}.{table} SET (autovacuum_enabled = false)")
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield Session(conn)


@pytest.mark.parametrize("root_ends", ["succeeded", "failed"], ids=["release", "cancel"])
def test_a_wide_fan_out_reads_its_children_by_id(
    session: Session, dsn: str, root_ends: str
) -> None:
    with Client(dsn) as client:
        # Small first: the session's plans are made on a table of a few rows.
        client.start_workflow(_fan("small", 2))
        session.end(root_ends, 1)
        assert session.plans, "auto_explain sent no plan"
        client.start_workflow(_fan("wide", WIDE))
    session.plans.clear()
    session.end(root_ends, 1)
    # The worker's own statements (every form has one of these CTEs) are not nested.
    nested = [
        p
        for p in session.plans
        if "finish_events AS (" not in p[0] and "claim_events AS (" not in p[0]
    ]
    assert nested, "the root's end ran no nested statement"
    bad = _bad_reads(session.plans)
    assert not bad, "\n".join(bad)
    wide = session.conn.execute(
        f"SELECT count(*) FILTER (WHERE j.status = 'waiting'), count(*) "
        f"FROM {SCHEMA}.jobs j JOIN {SCHEMA}.workflows w ON w.id = j.workflow_id "
        "WHERE w.name = 'wide'"
    ).fetchone()
    # Released: the parts queued, the leaves still waiting; canceled: nothing waits.
    assert wide == ((WIDE, 2 * WIDE + 1) if root_ends == "succeeded" else (0, 2 * WIDE + 1))
