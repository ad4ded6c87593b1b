"""The leader's workflow checks: overdue input nodes fail, stuck nodes are reported.

Contracts: an input node whose value did not come within ``timeout_s`` (after
its parents ended) fails with "input not provided within N s", and in the same
statement its children that require it are canceled and those with a
``finished`` edge are queued; a node still within its time, or still waiting
for parents, is left alone; batches are bounded. The "no stuck node" check
finds nothing in normal workflows; a node left waiting after its parents ended
(made here by bypassing the trigger) is logged as ``workflow.stuck_node`` at
ERROR with its ids, counted in ``queue_engine_workflow_stuck_nodes``, and left
untouched.
"""

from __future__ import annotations

import logging
import urllib.request
from typing import Any

import psycopg
import pytest
from support.nodes import statuses

from queue_engine import Client, Workflow, finished
from queue_engine.orchestrator import Orchestrator, OrchestratorSettings, metrics
from queue_engine.orchestrator.input_timeouts import InputTimeouts
from queue_engine.orchestrator.stuck_nodes import StuckNodeCheck
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain

SCHEMA = "queue_engine"
Q = "wfops"
Conn = psycopg.Connection[Any]


def ok(args: dict[str, Any]) -> Any:
    return {"ok": True}


def tasks() -> TaskRegistry:
    reg = TaskRegistry()
    reg.register(TaskDefinition(name="ok", handler=ok, queue=Q, max_attempts=1))
    return reg


def approval(name: str = "approval", timeout_s: int = 3600) -> Workflow:
    wf = Workflow(name)
    wf.add("prepare", "ok", queue=Q)
    wf.input("approve", after=["prepare"], timeout_s=timeout_s)
    wf.add("publish", "ok", queue=Q, after=["approve"])
    wf.add("notify", "ok", queue=Q, after=["publish"])
    wf.add("report", "ok", queue=Q, after=[finished("approve")])
    return wf


def overdue(conn: Conn, workflow_id: int, node: str = "approve") -> None:
    """Move the input's deadline into the past (instead of sleeping through the timeout)."""
    conn.execute(
        "UPDATE queue_engine.jobs SET available_at = now() - interval '1 second' "
        "WHERE workflow_id = %s AND node = %s",
        (workflow_id, node),
    )


def test_an_overdue_input_fails_and_cancels_its_children_in_the_same_statement(
    client: Client, conn: Conn, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.reset_counters()
    late = client.start_workflow(approval("late", timeout_s=5))
    in_time = client.start_workflow(approval("in-time", timeout_s=3600))
    not_yet = client.start_workflow(approval("not-yet", timeout_s=1))
    # Only the first two run their parents: the third input is still waiting for its parent.
    conn.execute(
        "UPDATE queue_engine.jobs SET available_at = now() + interval '1 hour' "
        "WHERE workflow_id = %s AND node = 'prepare'",
        (not_yet.id,),
    )
    drain(client, queue=Q, tasks=tasks())
    overdue(conn, late.id)
    sweep = InputTimeouts(dsn, SCHEMA)
    try:
        with caplog.at_level(logging.WARNING, logger="queue_engine.workflows"):
            result = sweep.run_once()
        assert [(n.workflow_id, n.node, n.timeout_s) for n in result.timed_out] == [
            (late.id, "approve", 5)
        ]
        # The children moved in the sweep's statement: nothing else ran since.
        assert statuses(client, late.id) == {
            "prepare": "succeeded",
            "approve": "failed",
            "publish": "canceled",
            "notify": "canceled",
            "report": "queued",
        }
        approve = next(n for n in client.workflow_nodes(late.id) if n.node == "approve")
        assert approve.error == "input not provided within 5 s"
        assert statuses(client, in_time.id)["approve"] == "waiting"
        assert statuses(client, not_yet.id)["approve"] == "waiting"
        assert "workflow.input_timed_out" in caplog.text
        assert metrics.counters()["workflow_inputs_timed_out"] == 1
        # A value that comes too late is refused the usual way; a second sweep finds nothing.
        assert client.provide_input(late.id, "approve", {"by": "ana"}) is False
        assert sweep.run_once().timed_out == []
        drain(client, queue=Q, tasks=tasks())
        assert client.get_workflow(late.id).state == "failed"
        kinds = conn.execute(
            "SELECT e.kind, e.message FROM queue_engine.job_events e "
            "JOIN queue_engine.jobs j ON j.id = e.job_id "
            "WHERE j.workflow_id = %s AND j.node = 'approve'",
            (late.id,),
        ).fetchall()
        assert ("input_timed_out", "input not provided within 5 s") in kinds
    finally:
        sweep.stop()


def test_input_timeouts_are_failed_in_bounded_batches(client: Client, conn: Conn, dsn: str) -> None:
    ids = [client.start_workflow(approval(f"batch-{i}", timeout_s=1)).id for i in range(5)]
    drain(client, queue=Q, tasks=tasks())
    for workflow_id in ids:
        overdue(conn, workflow_id)
    sweep = InputTimeouts(dsn, SCHEMA, batch_size=2, max_batches=2)
    try:
        first = sweep.run_once()
        assert (len(first.timed_out), first.batches) == (4, 2)
        second = sweep.run_once()
        assert (len(second.timed_out), second.batches) == (1, 1)
    finally:
        sweep.stop()
    assert all(statuses(client, i)["approve"] == "failed" for i in ids)


def scrape(server: metrics.MetricsServer) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def test_normal_workflows_show_no_stuck_node(
    client: Client, conn: Conn, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.reset_counters()
    done = client.start_workflow(approval("done"))
    client.start_workflow(approval("waiting-for-input"))
    drain(client, queue=Q, tasks=tasks())
    client.provide_input(done.id, "approve", True)
    drain(client, queue=Q, tasks=tasks())
    client.start_workflow(approval("not-started"))
    check = StuckNodeCheck(dsn, SCHEMA)
    try:
        with caplog.at_level(logging.DEBUG, logger="queue_engine.workflows"):
            result = check.run_once()
    finally:
        check.stop()
    assert (result.total, result.nodes) == (0, [])
    assert "workflow.stuck_node" not in caplog.text
    assert metrics.gauges()["workflow_stuck_nodes"] == 0
    assert metrics.counters()["workflow_stuck_checks"] == 1


def test_a_stuck_node_is_reported_as_an_engine_bug_and_left_alone(
    client: Client, conn: Conn, dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("prometheus_client")
    metrics.reset_counters()
    info = client.start_workflow(approval("broken"))
    # End 'prepare' behind the trigger's back (replica role: no triggers fire), so
    # 'approve' is left waiting with its only parent ended: what the engine must never do.
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'succeeded', finished_at = now() "
            "WHERE workflow_id = %s AND node = 'prepare'",
            (info.id,),
        )
    approve_id = next(n.job_id for n in client.workflow_nodes(info.id) if n.node == "approve")
    check = StuckNodeCheck(dsn, SCHEMA)
    server = metrics.start_metrics_server(dsn, SCHEMA, 0, is_leader=lambda: True, dead_after=30)
    try:
        with caplog.at_level(logging.ERROR, logger="queue_engine.workflows"):
            result = check.run_once()
        text = scrape(server)
    finally:
        check.stop()
        server.stop()
    assert result.total == 1
    assert [(n.job_id, n.workflow_id, n.node) for n in result.nodes] == [
        (approve_id, info.id, "approve")
    ]
    records = [r for r in caplog.records if r.getMessage().startswith("workflow.stuck_node")]
    assert len(records) == 1 and records[0].levelno == logging.ERROR
    line = records[0].getMessage()
    assert f"job_ids={approve_id}" in line
    assert f"workflow_ids={info.id}" in line
    assert f"{info.id}/approve" in line
    assert "queue-engine bug" in line
    assert "queue_engine_workflow_stuck_nodes 1.0" in text
    assert "queue_engine_workflow_stuck_checks_total 1.0" in text
    # Reported, not repaired.
    assert statuses(client, info.id)["approve"] == "waiting"


def test_the_leader_runs_both_checks_and_workflow_check_s_0_turns_the_stuck_check_off(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QUEUE_ENGINE_WORKFLOW_CHECK_S", raising=False)
    monkeypatch.setenv("QUEUE_ENGINE_SWEEP_S", "2")
    orch = Orchestrator(OrchestratorSettings.from_env(dsn, SCHEMA))
    assert orch.input_timeouts in orch.leader_services
    assert orch.input_timeouts.interval_s == 2.0  # the reaper's cadence
    assert orch.stuck_nodes is not None and orch.stuck_nodes in orch.leader_services
    assert orch.stuck_nodes.interval_s == 60.0
    monkeypatch.setenv("QUEUE_ENGINE_WORKFLOW_CHECK_S", "0")
    off = Orchestrator(OrchestratorSettings.from_env(dsn, SCHEMA))
    assert off.stuck_nodes is None
    assert not any(isinstance(s, StuckNodeCheck) for s in off.leader_services)
