"""A workflow node's end since migrations 0019 and 0020: its tally shard and its trigger.

Contracts: a new workflow has 16 tally shards (node id % 16) and a tally row
only for the shards its nodes fall in, whatever its size; its counts and state
follow a recount of its jobs through successes, failures and cancels; a
workflow started before 0019 with fewer shards (a small one) still ends right
after the upgrade, and one started under 0019 still ends right after a
downgrade to 0018. A node's end must set finished_at (0020) and a move out of an end
must clear it (the workflow trigger fires for UPDATE OF finished_at): SQL that
does not is refused, writing nothing; a plain job has no such rule; a node's
claim and its release by its parent never call the trigger function.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql
from support.nodes import Q, claim, end, node_status, registry, succeed, tallies

from queue_engine import Client, Workflow
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, Migrator
from queue_engine.testing import drain

Conn = psycopg.Connection[Any]


def fan(name: str, parts: int, failing: int | None = None) -> Workflow:
    """root -> parts -> join; part number ``failing`` (if any) fails at its one attempt."""
    wf = Workflow(name)
    wf.add("root", "ok", queue=Q)
    names = [
        wf.add(f"part-{i}", "boom", queue=Q, after=["root"], max_attempts=1)
        if i == failing
        else wf.add(f"part-{i}", "ok", queue=Q, after=["root"])
        for i in range(parts)
    ]
    wf.add("join", "ok", queue=Q, after=names)
    return wf


def test_a_new_workflow_of_any_size_has_16_shards_and_rows_only_where_nodes_are(
    client: Client, conn: Conn
) -> None:
    small = client.start_workflow(fan("small", 2)).id
    wide = client.start_workflow(fan("wide", 40)).id
    for wf, nodes in ((small, 4), (wide, 42)):
        t = tallies(conn, wf)
        assert t["shards"] == 16
        assert t["shards_present"] == sorted(t["residues"])
        assert len(t["shards_present"]) == min(16, nodes) == t["open_shards"]
        assert t["counted"] == t["recount"] == [nodes, 0, 0, 0]


def test_counts_follow_successes_failures_and_cancels(client: Client, conn: Conn) -> None:
    good = client.start_workflow(fan("good", 20)).id
    bad = client.start_workflow(fan("bad", 20, failing=7)).id
    drain(client, queue=Q, tasks=registry())
    g, b = tallies(conn, good), tallies(conn, bad)
    assert g["state"] == "succeeded" and g["open_shards"] == 0
    assert g["counted"] == g["recount"] == [0, 22, 0, 0]
    # The failed part cancels the join; the other parts still succeed.
    assert b["state"] == "failed" and b["open_shards"] == 0
    assert b["counted"] == b["recount"] == [0, 20, 1, 1]


def test_a_small_workflow_started_before_0019_ends_right_after_the_upgrade(
    empty_dsn: str,
) -> None:
    migrator = Migrator(empty_dsn)
    migrator.up(18)
    with Client(empty_dsn) as client, psycopg.connect(empty_dsn, autocommit=True) as conn:
        old = client.start_workflow(fan("old", 3)).id  # 5 nodes: 5 shards, id % 5
        assert tallies(conn, old)["shards"] == 5
        succeed(conn, old, "root")
        succeed(conn, old, "part-0")
        migrator.up()
        assert migrator.current_version() == ENGINE_SCHEMA_VERSION
        upto = conn.execute("SELECT queue_engine.workflow_few_shards_upto()").fetchone()
        assert upto == (old,)
        new = client.start_workflow(fan("new", 3)).id
        assert tallies(conn, new)["shards"] == 16
        drain(client, queue=Q, tasks=registry())
        for wf in (old, new):
            t = tallies(conn, wf)
            assert t["state"] == "succeeded" and t["open_shards"] == 0
            assert t["counted"] == t["recount"] == [0, 5, 0, 0]


def test_a_workflow_started_under_0019_ends_right_after_a_downgrade(empty_dsn: str) -> None:
    migrator = Migrator(empty_dsn)
    migrator.up()
    with Client(empty_dsn) as client, psycopg.connect(empty_dsn, autocommit=True) as conn:
        wf = client.start_workflow(fan("kept", 3)).id
        assert conn.execute("SELECT queue_engine.workflow_few_shards_upto()").fetchone() == (0,)
        succeed(conn, wf, "root")
        migrator.down(18)
        for node in ("part-0", "part-1", "part-2", "join"):
            succeed(conn, wf, node)
        t = tallies(conn, wf)
        assert t["state"] == "succeeded" and t["open_shards"] == 0
        assert t["counted"] == t["recount"] == [0, 5, 0, 0]


def test_a_nodes_end_that_does_not_set_finished_at_is_refused(client: Client, conn: Conn) -> None:
    wf = client.start_workflow(fan("sql-end", 2)).id
    claim(conn, wf, "root")
    for status in ("succeeded", "failed", "canceled", "lost"):
        with pytest.raises(pg_errors.CheckViolation, match="without setting finished_at"):
            conn.execute(
                "UPDATE queue_engine.jobs SET status = %s WHERE workflow_id = %s AND node = 'root'",
                (status, wf),
            )
    assert node_status(conn, wf, "root") == "running"
    assert node_status(conn, wf, "part-0") == "waiting"
    end(conn, wf, "root", "succeeded")
    assert node_status(conn, wf, "part-0") == node_status(conn, wf, "part-1") == "queued"
    assert tallies(conn, wf)["counted"] == [3, 1, 0, 0]


def test_a_node_leaving_an_end_must_clear_finished_at(client: Client, conn: Conn) -> None:
    wf = client.start_workflow(fan("sql-retry", 2)).id
    claim(conn, wf, "root")
    end(conn, wf, "root", "failed")
    assert tallies(conn, wf)["state"] == "failed"  # the parts were canceled with it
    with pytest.raises(pg_errors.CheckViolation, match="without clearing finished_at"):
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'queued' WHERE workflow_id = %s AND node = 'root'",
            (wf,),
        )
    assert node_status(conn, wf, "root") == "failed"
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'queued', finished_at = NULL"
        " WHERE workflow_id = %s AND node = 'root'",
        (wf,),
    )
    t = tallies(conn, wf)
    assert t["state"] == "running"
    assert t["counted"] == t["recount"] == [1, 0, 0, 3]


def test_a_plain_job_may_still_end_by_its_status_alone(conn: Conn) -> None:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (task, queue, status, attempt)"
        " VALUES ('t', 'plain', 'running', 1) RETURNING id"
    ).fetchone()
    assert row is not None
    conn.execute("UPDATE queue_engine.jobs SET status = 'succeeded' WHERE id = %s", row)
    assert conn.execute("SELECT status FROM queue_engine.jobs WHERE id = %s", row).fetchone() == (
        "succeeded",
    )


def test_claims_and_releases_never_call_the_workflow_trigger(client: Client, conn: Conn) -> None:
    """Counted by Postgres itself (track_functions): one call per node's end, none else.

    Before 0020 the trigger fired for UPDATE OF status: each node's claim and
    each child's release by its parent called the function too.
    """
    conn.execute(
        sql.SQL("ALTER DATABASE {} SET track_functions = 'all'").format(
            sql.Identifier(conn.info.dbname)
        )
    )
    wf = client.start_workflow(fan("counted", 20)).id  # 22 nodes, 20 released by the root
    drain(client, queue=Q, tasks=registry())
    conn.execute("SET track_functions = 'all'")
    conn.execute("SELECT pg_stat_force_next_flush()")
    calls = conn.execute(
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
        " WHERE schemaname = 'queue_engine' AND funcname = 'jobs_workflow_moved'"
    ).fetchone()
    assert tallies(conn, wf)["state"] == "succeeded"
    assert calls == (22,)
