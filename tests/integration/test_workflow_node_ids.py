"""A workflow's node names in their own table (migrations 0021, 0022).

Contracts: start_workflow writes one (workflow, node) -> job row per node, and
the names stay unique in a workflow; no index on jobs carries node names any
more; a workflow started before 0021 is found by name after the upgrade (its
names were copied), so provide_input, cancel, retry and the node listing work
on it. (The pruner deletes a workflow's names with its jobs:
test_pruner_workflows.py counts them in a workflow's footprint.)
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from queue_engine import Client, Workflow
from queue_engine.foundation.errors import InvalidTransition
from queue_engine.foundation.migrate import Migrator

Conn = psycopg.Connection[Any]
Q = "wf"


def fan(name: str, parts: int) -> Workflow:
    wf = Workflow(name)
    wf.add("root", "t", queue=Q)
    names = [wf.add(f"part-{i}", "t", queue=Q, after=["root"]) for i in range(parts)]
    wf.input("ask", after=["root"], queue=Q)
    wf.add("join", "t", queue=Q, after=[*names, "ask"])
    return wf


def names(conn: Conn, workflow_id: int) -> dict[str, int]:
    rows = conn.execute(
        "SELECT node, job_id FROM queue_engine.workflow_node_ids WHERE workflow_id = %s",
        (workflow_id,),
    ).fetchall()
    return {str(node): int(job) for node, job in rows}


def test_start_writes_each_nodes_name_once_and_jobs_carry_no_name_index(
    client: Client, conn: Conn
) -> None:
    wf = client.start_workflow(fan("named", 3)).id
    by_name = names(conn, wf)
    jobs = dict(
        conn.execute(
            "SELECT node, id FROM queue_engine.jobs WHERE workflow_id = %s", (wf,)
        ).fetchall()
    )
    assert by_name == jobs and len(by_name) == 6
    indexes = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'queue_engine' AND tablename = 'jobs'"
    ).fetchall()
    assert not [d for (d,) in indexes if "node" in d]


def test_a_workflow_started_before_0021_is_found_by_name_after_the_upgrade(
    empty_dsn: str,
) -> None:
    migrator = Migrator(empty_dsn)
    migrator.up(20)
    with Client(empty_dsn) as client, psycopg.connect(empty_dsn, autocommit=True) as conn:
        old = client.start_workflow(fan("old", 2)).id
        other = client.start_workflow(fan("other", 2)).id
        migrator.up()
        assert names(conn, old) == dict(
            conn.execute(
                "SELECT node, id FROM queue_engine.jobs WHERE workflow_id = %s", (old,)
            ).fetchall()
        )
        assert [n.node for n in client.workflow_nodes(old)] == [
            "root",
            "part-0",
            "part-1",
            "ask",
            "join",
        ]
        # provide_input finds the node by name: it is there, its parent has not ended.
        with pytest.raises(InvalidTransition, match="not awaiting input yet"):
            client.provide_input(old, "ask", {"ok": True})
        # Cancel finds every unfinished node of the workflow, and only its own.
        client.cancel_workflow(old)
        assert {n.status for n in client.workflow_nodes(old)} == {"canceled"}
        assert {n.status for n in client.workflow_nodes(other)} == {"queued", "waiting"}
        # Retry finds the canceled nodes again.
        client.retry_workflow(old)
        assert client.get_workflow(old).state == "running"
        assert {n.status for n in client.workflow_nodes(old)} == {"queued", "waiting"}
