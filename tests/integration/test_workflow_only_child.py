"""A workflow node's one child on its row (migration 0024).

Contracts: start_workflow writes each node's only child and that edge's gate
on the node's row (jobs.only_child, jobs.only_child_gate), exactly as job_deps
has the edge, and NULL for a node with no child or several and for a plain
job; a node with one child that succeeds takes itself off its child's count
without reading job_deps, and any other end still reads it; a workflow started
before 0024 (no only child on its rows) ends right after the upgrade, and one
started under 0024 ends right after a downgrade to 0023.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support.nodes import Q, claim, end, node_status, registry, succeed, tallies

from queue_engine import Client, Workflow, finished
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, Migrator
from queue_engine.testing import drain

Conn = psycopg.Connection[Any]
PARTS = 20  # more than 16 parents: the join counts them through gates


def shaped(name: str) -> Workflow:
    """root -> 20 parts -> join -> tail -> (x, y): every kind of out-edges."""
    wf = Workflow(name)
    wf.add("root", "ok", queue=Q)
    parts = [wf.add(f"part-{i}", "ok", queue=Q, after=["root"]) for i in range(PARTS)]
    wf.add("join", "ok", queue=Q, after=parts)
    wf.add("tail", "ok", queue=Q, after=["join"])
    wf.add("x", "ok", queue=Q, after=["tail"])
    wf.add("y", "ok", queue=Q, after=[finished("tail")])
    return wf


def rows(conn: Conn, workflow_id: int) -> dict[str, tuple[str | None, int | None]]:
    """Each node's only child (by name) and its gate."""
    found = conn.execute(
        "SELECT p.node, c.node, p.only_child_gate FROM queue_engine.jobs p"
        " LEFT JOIN queue_engine.jobs c ON c.id = p.only_child"
        " WHERE p.workflow_id = %s",
        (workflow_id,),
    ).fetchall()
    return {str(node): (child, gate) for node, child, gate in found}


#: Nodes whose only child or gate is not what job_deps says (the invariant
#: tests run the same check on random shapes).
DISAGREE = """
SELECT p.node FROM queue_engine.jobs p
CROSS JOIN LATERAL (SELECT count(*) AS n, min(d.child_id) AS child, min(d.gate) AS gate
                    FROM queue_engine.job_deps d WHERE d.parent_id = p.id) x
WHERE p.workflow_id = %s
  AND (p.only_child, p.only_child_gate) IS DISTINCT FROM
      (CASE WHEN x.n = 1 THEN x.child END, CASE WHEN x.n = 1 THEN x.gate END)
"""


def test_start_writes_each_nodes_only_child_and_gate(client: Client, conn: Conn) -> None:
    wf = client.start_workflow(shaped("shaped")).id
    expected: dict[str, tuple[str | None, int | None]] = {
        "root": (None, None),  # 20 children
        **{f"part-{i}": ("join", i % 16) for i in range(PARTS)},  # the k-th parent: gate k-1 % 16
        "join": ("tail", None),  # one parent: counted on the child's own row
        "tail": (None, None),  # two children
        "x": (None, None),
        "y": (None, None),
    }
    assert rows(conn, wf) == expected
    assert conn.execute(DISAGREE, (wf,)).fetchall() == []
    job = client.enqueue("plain", queue=Q)
    assert conn.execute(
        "SELECT only_child, only_child_gate FROM queue_engine.jobs WHERE id = %s", (job.id,)
    ).fetchone() == (None, None)


def edge_reads(conn: Conn) -> int:
    """Scans of job_deps in this transaction so far."""
    row = conn.execute(
        "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables"
        " WHERE schemaname = 'queue_engine' AND relname = 'job_deps'"
    ).fetchone()
    return int(row[0]) if row else 0


def test_a_succeeded_node_with_one_child_reads_no_edges(client: Client, dsn: str) -> None:
    wf = client.start_workflow(shaped("reads")).id
    with psycopg.connect(dsn, autocommit=True) as conn:
        succeed(conn, wf, "root")  # 20 children: reads its edges
    with psycopg.connect(dsn) as conn:  # one transaction: its own statistics
        for i in range(PARTS):
            succeed(conn, wf, f"part-{i}")
        assert node_status(conn, wf, "join") == "queued"  # the last gate released it
        succeed(conn, wf, "join")
        assert node_status(conn, wf, "tail") == "queued"
        assert edge_reads(conn) == 0
        conn.commit()
    with psycopg.connect(dsn) as conn:
        claim(conn, wf, "tail")
        end(conn, wf, "tail", "failed")  # not the common end: its edges say what to do
        assert edge_reads(conn) > 0
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert node_status(conn, wf, "x") == "canceled"  # after tail succeeded
        assert node_status(conn, wf, "y") == "queued"  # after tail finished
        assert tallies(conn, wf)["counted"] == [1, 22, 1, 1]


def test_a_workflow_started_before_0024_ends_right_after_the_upgrade(empty_dsn: str) -> None:
    migrator = Migrator(empty_dsn)
    migrator.up(23)
    with Client(empty_dsn) as client, psycopg.connect(empty_dsn, autocommit=True) as conn:
        old = client.start_workflow(shaped("old")).id
        succeed(conn, old, "root")
        succeed(conn, old, "part-0")
        migrator.up()
        assert migrator.current_version() == ENGINE_SCHEMA_VERSION
        assert set(rows(conn, old).values()) == {(None, None)}
        new = client.start_workflow(shaped("new")).id
        assert rows(conn, new)["part-3"] == ("join", 3)
        drain(client, queue=Q, tasks=registry())
        for wf in (old, new):
            t = tallies(conn, wf)
            assert t["state"] == "succeeded" and t["open_shards"] == 0
            assert t["counted"] == t["recount"] == [0, PARTS + 5, 0, 0]


def test_a_workflow_started_under_0024_ends_right_after_a_downgrade(empty_dsn: str) -> None:
    migrator = Migrator(empty_dsn)
    migrator.up()
    with Client(empty_dsn) as client, psycopg.connect(empty_dsn, autocommit=True) as conn:
        wf = client.start_workflow(shaped("kept")).id
        succeed(conn, wf, "root")
        succeed(conn, wf, "part-0")
        migrator.down(23)
        columns = conn.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'queue_engine'"
            " AND table_name = 'jobs' AND column_name LIKE 'only_child%%'"
        ).fetchone()
        assert columns == (0,)
        # A worker waits for the newer schema: the rest end in SQL, as its statement would.
        for node in [*(f"part-{i}" for i in range(1, PARTS)), "join", "tail", "x", "y"]:
            succeed(conn, wf, node)
        t = tallies(conn, wf)
        assert t["state"] == "succeeded" and t["open_shards"] == 0
        assert t["counted"] == t["recount"] == [0, PARTS + 5, 0, 0]
