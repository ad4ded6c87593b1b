"""A workflow retry keeps the verdicts of the parents it does not re-run.

``retry_workflow`` re-runs failed, canceled and lost nodes; a parent that
ended ``skipped`` is not re-run, so a re-run child behind a ``succeeded`` edge
from it must end ``skipped`` again, never run. The case that found the gap: the
workflow is canceled while the parent runs (its child, waiting, is canceled
at once), then the parent's handler ends ``skipped`` anyway (it never reached a
checkpoint). On retry the child has no parent left to wait for; it was queued
and ran, although its edge requires a parent that was skipped.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support.nodes import statuses

from queue_engine import Client, Workflow, finished

Conn = psycopg.Connection[Any]


def end_running_node(conn: Conn, job_id: int, status: str) -> None:
    """What a worker's finish does to the row (the trigger does the rest)."""
    conn.execute(
        "UPDATE queue_engine.jobs SET status = %s, finished_at = now(),"
        ' result = \'{"skipped": "by the handler"}\' WHERE id = %s',
        (status, job_id),
    )


def test_a_retried_child_of_a_skipped_parent_is_skipped_again_not_run(
    client: Client, conn: Conn
) -> None:
    wf = Workflow("skip-then-retry")
    wf.add("parent", "ok", queue="wf")
    wf.add("child", "ok", queue="wf", after=["parent"])
    wf.add("report", "ok", queue="wf", after=[finished("child")])
    info = client.start_workflow(wf)
    ids = {n.node: n.job_id for n in client.workflow_nodes(info.id)}
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (ids["parent"],))
    client.cancel_workflow(info.id)
    assert statuses(client, info.id) == {
        "parent": "running",
        "child": "canceled",
        "report": "canceled",
    }
    end_running_node(conn, ids["parent"], "skipped")
    assert client.get_workflow(info.id).state == "canceled"

    client.retry_workflow(info.id)

    after = statuses(client, info.id)
    assert after["parent"] == "skipped"
    assert after["child"] == "skipped", after  # was 'queued': it would have run
    # The 'finished' edge runs the report whatever way the child ended.
    assert after["report"] == "queued", after
    assert not conn.execute("SELECT * FROM queue_engine.stuck_workflow_nodes()").fetchall()
