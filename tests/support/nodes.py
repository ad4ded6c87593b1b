"""Workflow nodes: moved in SQL with their tallies, or built as read back (``NodeInfo``).

A test of what a node's end does (the workflow trigger) claims and ends nodes
with plain UPDATEs, as a worker's statement would, and compares a workflow's
tally shards with a recount of its jobs; a test through the client reads the
nodes' statuses back with :func:`statuses`. A test of a drawing (``queue-ctl
workflows show``, the dashboard's graph) builds the nodes it draws with
:func:`node`, without a database.
"""

from __future__ import annotations

from typing import Any

import psycopg

from queue_engine import Client
from queue_engine.producer.context import JobContext
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.producer.workflows.model import NodeInfo

Conn = psycopg.Connection[Any]
Q = "wf"

#: Per workflow: its tallies against a recount of its jobs, and its state.
TALLIES = """
SELECT w.state, w.shards, w.open_shards,
       (SELECT array_agg(t.shard ORDER BY t.shard) FROM queue_engine.workflow_tallies t
        WHERE t.workflow_id = w.id) AS shards_present,
       (SELECT array_agg(DISTINCT (j.id %% 16)::int) FROM queue_engine.jobs j
        WHERE j.workflow_id = w.id) AS residues,
       (SELECT jsonb_build_array(sum(unfinished), sum(succeeded), sum(failed), sum(canceled))
        FROM queue_engine.workflow_tallies t WHERE t.workflow_id = w.id) AS counted,
       (SELECT jsonb_build_array(
            count(*) FILTER (WHERE j.status IN ('waiting', 'queued', 'running')),
            count(*) FILTER (WHERE j.status = 'succeeded'),
            count(*) FILTER (WHERE j.status = 'failed'),
            count(*) FILTER (WHERE j.status = 'canceled'))
        FROM queue_engine.jobs j WHERE j.workflow_id = w.id) AS recount
FROM queue_engine.workflows w WHERE w.id = %s
"""


def tallies(conn: Conn, workflow_id: int) -> dict[str, Any]:
    row = conn.execute(TALLIES, (workflow_id,)).fetchone()
    assert row is not None
    keys = ("state", "shards", "open_shards", "shards_present", "residues", "counted", "recount")
    return dict(zip(keys, row, strict=True))


def ok(args: dict[str, Any], ctx: JobContext) -> Any:
    return ctx.job.node


def boom(args: dict[str, Any], ctx: JobContext) -> Any:
    raise RuntimeError("boom")


def registry(queue: str = Q, **handlers: Any) -> TaskRegistry:
    """``(args, ctx)`` handlers by task name, one attempt each (``ok`` and ``boom`` if none)."""
    reg = TaskRegistry()
    for name, fn in (handlers or {"ok": ok, "boom": boom}).items():
        reg.register(
            TaskDefinition(name=name, handler=fn, queue=queue, max_attempts=1, wants_context=True)
        )
    return reg


def claim(conn: Conn, workflow_id: int, node: str) -> None:
    """Start a queued node in SQL, as a worker's claim would."""
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, started_at = now()"
        " WHERE workflow_id = %s AND node = %s AND status = 'queued'",
        (workflow_id, node),
    )


def end(conn: Conn, workflow_id: int, node: str, status: str) -> None:
    """End a running node in SQL, setting finished_at as every end must."""
    conn.execute(
        "UPDATE queue_engine.jobs SET status = %s, finished_at = now()"
        " WHERE workflow_id = %s AND node = %s AND status = 'running'",
        (status, workflow_id, node),
    )


def succeed(conn: Conn, workflow_id: int, node: str) -> None:
    """End a queued node well in SQL, as a worker's claim and finish would."""
    claim(conn, workflow_id, node)
    end(conn, workflow_id, node, "succeeded")


def node_status(conn: Conn, workflow_id: int, node: str) -> str:
    row = conn.execute(
        "SELECT status FROM queue_engine.jobs WHERE workflow_id = %s AND node = %s",
        (workflow_id, node),
    ).fetchone()
    assert row is not None
    return str(row[0])


def statuses(client: Client, workflow_id: int) -> dict[str, str]:
    """``{node: status}`` of a workflow's nodes, as the client reads them back."""
    return {n.node: n.status for n in client.workflow_nodes(workflow_id)}


_ids = iter(range(1, 1_000_000))


def node(
    name: str,
    *,
    after: list[str] | None = None,
    task: str = "t.work",
    status: str = "succeeded",
    attempt: int = 1,
    max_attempts: int = 3,
    duration_ms: int | None = 200,
    pending: int | None = 0,
    error: str | None = None,
    requires: dict[str, str] | None = None,
    **extra: Any,
) -> NodeInfo:
    """A node as ``workflow_nodes`` reads it back; job ids count up, so build parents first."""
    requires = requires or {}
    return NodeInfo(
        job_id=next(_ids),
        node=name,
        task=task,
        queue="q",
        status=status,
        attempt=attempt,
        max_attempts=max_attempts,
        pending_parents=pending,
        started_at=extra.get("started_at"),
        finished_at=extra.get("finished_at"),
        duration_ms=duration_ms,
        error=error,
        result=None,
        after=[(p, requires.get(p, "succeeded")) for p in (after or [])],
    )
