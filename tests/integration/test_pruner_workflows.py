"""Contract of workflow retention (``sql/prune_workflows.sql``, ``sql/prune_jobs.sql``).

A job of a workflow is never pruned on its own, however old: not while its
workflow runs (its children read its result and edges), and not once it has
ended either. A finished workflow is pruned as a whole — its row, tally shards,
jobs, their events, edges and gates — once it finished longer ago than the
retention of its final state (succeeded, failed, canceled), in batches bounded
in jobs (whole workflows, at least one); a dry run counts the same and deletes
nothing, and ``queue-ctl prune`` reports it.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from queue_engine import Client, Permanent, Workflow
from queue_engine.cli.ctl import main
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.pruner import Pruner, Retention, prune_dry_run, prune_once
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain

SCHEMA = "queue_engine"
Q = "wfprune"
Conn = psycopg.Connection[Any]


def ok(args: dict[str, Any]) -> Any:
    return {"ok": True}


def boom(args: dict[str, Any]) -> Any:
    raise Permanent("boom")


def tasks() -> TaskRegistry:
    reg = TaskRegistry()
    reg.register(TaskDefinition(name="ok", handler=ok, queue=Q, max_attempts=1))
    reg.register(TaskDefinition(name="boom", handler=boom, queue=Q, max_attempts=1))
    return reg


def fan_in(name: str, width: int = 20, last: str = "ok") -> Workflow:
    """``width`` parents into one child (more than 16: the child counts through gates)."""
    wf = Workflow(name)
    for i in range(width):
        wf.add(f"p{i}", "ok", queue=Q)
    wf.add("join", last, queue=Q, after=[f"p{i}" for i in range(width)])
    return wf


def scalar(conn: Conn, sql: str, *params: Any) -> int:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


def footprint(conn: Conn, workflow_id: int) -> dict[str, int]:
    """Every row a workflow owns, per table."""
    ids = "SELECT id FROM queue_engine.jobs WHERE workflow_id = %s"
    return {
        "workflows": scalar(
            conn, "SELECT count(*) FROM queue_engine.workflows WHERE id = %s", workflow_id
        ),
        "tallies": scalar(
            conn,
            "SELECT count(*) FROM queue_engine.workflow_tallies WHERE workflow_id = %s",
            workflow_id,
        ),
        "jobs": scalar(
            conn, "SELECT count(*) FROM queue_engine.jobs WHERE workflow_id = %s", workflow_id
        ),
        "names": scalar(
            conn,
            "SELECT count(*) FROM queue_engine.workflow_node_ids WHERE workflow_id = %s",
            workflow_id,
        ),
        "events": scalar(
            conn,
            f"SELECT count(*) FROM queue_engine.job_events WHERE job_id IN ({ids})",
            workflow_id,
        ),
        "deps": scalar(
            conn,
            f"SELECT count(*) FROM queue_engine.job_deps WHERE child_id IN ({ids})",
            workflow_id,
        ),
        "gates": scalar(
            conn,
            f"SELECT count(*) FROM queue_engine.job_gates WHERE child_id IN ({ids})",
            workflow_id,
        ),
    }


def age(conn: Conn, workflow_id: int, interval: str) -> None:
    """Make a workflow (and its nodes) look finished ``interval`` ago."""
    conn.execute(
        "UPDATE queue_engine.workflows SET finished_at = now() - %s::interval "
        "WHERE id = %s AND finished_at IS NOT NULL",
        (interval, workflow_id),
    )
    conn.execute(
        "UPDATE queue_engine.jobs SET finished_at = now() - %s::interval "
        "WHERE workflow_id = %s AND finished_at IS NOT NULL",
        (interval, workflow_id),
    )


def test_finished_workflows_go_as_a_whole_after_their_states_retention(
    client: Client, conn: Conn, dsn: str
) -> None:
    old_ok = client.start_workflow(fan_in("old-ok")).id
    young_ok = client.start_workflow(fan_in("young-ok")).id
    old_failed = client.start_workflow(fan_in("old-failed", last="boom")).id
    month_failed = client.start_workflow(fan_in("month-failed", last="boom")).id
    old_canceled = client.start_workflow(fan_in("old-canceled")).id
    client.cancel_workflow(old_canceled)
    running = Workflow("running")
    running.add("first", "ok", queue=Q)
    running.input("approve", after=["first"])
    running_id = client.start_workflow(running).id
    drain(client, queue=Q, tasks=tasks())
    states = {i: client.get_workflow(i).state for i in (old_ok, old_failed, old_canceled)}
    assert states == {old_ok: "succeeded", old_failed: "failed", old_canceled: "canceled"}
    assert client.get_workflow(running_id).state == "running"
    before = footprint(conn, old_ok)
    assert before["gates"] > 0 and before["deps"] == 20 and before["events"] > 0
    assert before["names"] == before["jobs"] == 21
    for workflow_id, interval in (
        (old_ok, "8 days"),
        (young_ok, "1 day"),
        (old_failed, "31 days"),
        (month_failed, "10 days"),
        (old_canceled, "31 days"),
    ):
        age(conn, workflow_id, interval)
    # The running workflow's first node ended long ago: still never pruned.
    conn.execute(
        "UPDATE queue_engine.jobs SET finished_at = now() - interval '90 days' "
        "WHERE workflow_id = %s AND finished_at IS NOT NULL",
        (running_id,),
    )
    plain = scalar(
        conn,
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, started_at, finished_at) "
        "VALUES ('q', 'plain', 'succeeded', 1, now() - interval '9 days', "
        "now() - interval '9 days') RETURNING id",
    )

    dry = prune_dry_run(conn, SCHEMA, Retention())
    assert dry.workflows == {"succeeded": 1, "failed": 1, "canceled": 1}
    assert dry.workflow_jobs == 63 and dry.jobs == {"succeeded": 1}
    assert footprint(conn, old_ok) == before  # a dry run deletes nothing

    metrics.reset_counters()
    pruner = Pruner(dsn, SCHEMA, retention=Retention())
    try:
        result = pruner.run_once()
    finally:
        pruner.stop()
    assert result.workflows == {"succeeded": 1, "failed": 1, "canceled": 1}
    assert result.workflow_jobs == 63
    assert result.jobs == {"succeeded": 1}
    assert result.log_fields()["workflows"] == 3
    assert metrics.counters()["pruned_workflows"] == 3
    assert metrics.counters()["pruned_jobs"] == 64
    gone = dict.fromkeys(before, 0)
    for workflow_id in (old_ok, old_failed, old_canceled):
        assert footprint(conn, workflow_id) == gone
    assert footprint(conn, young_ok)["jobs"] == 21
    assert footprint(conn, month_failed)["jobs"] == 21
    assert footprint(conn, running_id)["jobs"] == 2
    assert scalar(conn, "SELECT count(*) FROM queue_engine.jobs WHERE id = %s", plain) == 0
    assert not prune_once(conn, SCHEMA, Retention()).did_work


def test_workflow_batches_are_bounded_in_jobs_and_take_whole_workflows(
    client: Client, conn: Conn
) -> None:
    ids = []
    for i in range(4):
        wf = Workflow(f"chain-{i}")
        wf.add("a", "ok", queue=Q)
        wf.add("b", "ok", queue=Q, after=["a"])
        wf.add("c", "ok", queue=Q, after=["b"])
        ids.append(client.start_workflow(wf).id)
    big = client.start_workflow(fan_in("big", width=9)).id  # 10 jobs: more than a batch
    drain(client, queue=Q, tasks=tasks())
    for n, workflow_id in enumerate([*ids, big]):
        age(conn, workflow_id, f"{30 - n} days")  # oldest first: the chains, then big
    # 7 jobs a statement: two 3-node workflows (6), never a third (9), never half of one.
    # (One retention: the run's first statement is the jobs group's, the second ours.)
    one_day = Retention.uniform(86400)
    first = prune_once(conn, SCHEMA, one_day, batch_size=7, max_batches=2)
    assert (first.workflows, first.workflow_jobs, first.more) == ({"succeeded": 2}, 6, True)
    assert [footprint(conn, i)["jobs"] for i in ids] == [0, 0, 3, 3]
    rest = prune_once(conn, SCHEMA, one_day, batch_size=7, max_batches=10)
    # Two more chains, then the 10-node workflow alone in a statement of its own.
    assert (rest.workflows, rest.workflow_jobs, rest.more) == ({"succeeded": 3}, 16, False)
    assert footprint(conn, big)["jobs"] == 0


def test_queue_ctl_prune_counts_finished_workflows(
    client: Client, conn: Conn, dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    workflow_id = client.start_workflow(fan_in("cli", width=3)).id
    drain(client, queue=Q, tasks=tasks())
    age(conn, workflow_id, "2 days")

    def run(*args: str) -> str:
        with pytest.raises(SystemExit) as exc:
            main(["--dsn", dsn, "prune", *args])
        assert exc.value.code in (0, None)
        return capsys.readouterr().out

    out = run("--dry-run", "--older-than", "1d")
    assert "1 finished workflows (succeeded 1) with 4 jobs" in out, out
    assert footprint(conn, workflow_id)["jobs"] == 4
    out = run("--older-than", "1d", "--json")
    assert '"workflows": 1' in out and '"workflow_jobs": 4' in out, out
    assert footprint(conn, workflow_id)["workflows"] == 0
