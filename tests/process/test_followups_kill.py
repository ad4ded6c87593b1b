"""Atomic follow-ups with real processes: a worker killed before its finish commits.

The handler has returned and buffered its follow-ups; the worker's finish
statement (success + follow-ups) is blocked on the job's row, which the test
holds (``SELECT ... FOR UPDATE``). The worker is killed -9 and its backend
terminated, so that statement can never commit: neither the success nor the
follow-ups exist. The orchestrator gives the job back, a new worker runs it
again, and the follow-ups exist exactly once, made by the second attempt.
"""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import support.workers
from support.orchestrators import WAIT_S, procs, role_of, spawn, wait_for

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here

QUEUE = "fu"
FAST = {
    "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
    "QUEUE_ENGINE_POLL_S": "0.1",
    "QUEUE_ENGINE_SWEEP_S": "0.2",
}
#: ``spawn_worker(dsn, log_file=..., **env)``: a ``followups_app`` worker on ``fu``, fast cadences.
spawn_worker = partial(
    support.workers.spawn_worker, queue=QUEUE, app="followups_app", log_level="DEBUG", **FAST
)


def one(conn: psycopg.Connection[Any], query: str, *params: object) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def followups_of(conn: psycopg.Connection[Any], parent_id: int) -> list[str]:
    """The 'created' messages of the follow-ups of ``parent_id``."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT e.message FROM queue_engine.job_events e WHERE e.kind = 'created'"
            " AND e.message LIKE %s ORDER BY e.job_id",
            (f"follow-up of job {parent_id} %",),
        ).fetchall()
    ]


def test_a_worker_killed_before_its_finish_commits_leaves_no_followups_and_the_retry_makes_them_once(
    dsn: str, conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    orch = spawn(dsn, tmp_path / "orchestrator.log", **FAST)
    procs.append(orch)
    wait_for("the orchestrator to lead", lambda: role_of(conn, orch.pid) == "leader", procs)
    # The default heartbeat (10 s): a lease renewal blocked on the held row in
    # the instant before the finish is sent would keep the finish from being sent.
    victim = spawn_worker(dsn, log_file=tmp_path / "worker1.log", QUEUE_ENGINE_HEARTBEAT_S="10")
    procs.append(victim)

    go = tmp_path / "go"
    children = [{"task": "followups.child", "args": {"n": n}} for n in range(2)]
    parent_id = one(
        conn,
        "INSERT INTO queue_engine.jobs (queue, task, args, max_attempts)"
        " VALUES (%s, 'followups.parent', %s::jsonb, 3) RETURNING id",
        QUEUE,
        psycopg.types.json.Jsonb({"children": children, "go_file": str(go)}),
    )
    wait_for(
        "the job to run on the worker",
        lambda: one(
            conn,
            "SELECT 1 FROM queue_engine.jobs j JOIN queue_engine.workers w ON w.id = j.claimed_by"
            " WHERE j.id = %s AND j.status = 'running' AND w.pid = %s",
            parent_id,
            victim.pid,
        ),
        procs,
    )
    backend_pid = one(
        conn, "SELECT backend_pid FROM queue_engine.workers WHERE pid = %s", victim.pid
    )
    assert backend_pid is not None

    # Hold the job's row, then let the handler return: the finish blocks on the row.
    holder = psycopg.connect(dsn)
    try:
        holder.execute("SELECT 1 FROM queue_engine.jobs WHERE id = %s FOR UPDATE", (parent_id,))
        go.touch()
        wait_for(
            "the worker's finish to wait for the row lock",
            # (pg_stat_activity keeps the first 1 kB of a statement's text.)
            lambda: one(
                conn,
                "SELECT wait_event_type = 'Lock' AND query LIKE 'WITH outcome AS%%'"
                " FROM pg_stat_activity WHERE pid = %s",
                backend_pid,
            ),
            procs,
        )
        victim.kill()
        victim.wait(timeout=WAIT_S)
        procs.remove(victim)
        assert one(conn, "SELECT pg_terminate_backend(%s)", backend_pid) is True
        wait_for(
            "the worker's backend to end",
            lambda: (
                one(conn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", backend_pid) == 0
            ),
            procs,
        )
    finally:
        holder.rollback()
        holder.close()

    # Neither the success nor the follow-ups: the statement never committed.
    assert one(conn, "SELECT attempt FROM queue_engine.jobs WHERE id = %s", parent_id) == 1
    assert one(conn, "SELECT status FROM queue_engine.jobs WHERE id = %s", parent_id) in (
        "running",
        "queued",  # the orchestrator may have given it back already
    )
    assert followups_of(conn, parent_id) == []
    assert one(conn, "SELECT count(*) FROM queue_engine.jobs WHERE queue = 'fu.out'") == 0
    assert (
        one(
            conn,
            "SELECT count(*) FROM queue_engine.job_events WHERE job_id = %s AND kind = 'succeeded'",
            parent_id,
        )
        == 0
    )

    # The orchestrator recovers the job; a new worker runs it again, to success.
    wait_for(
        "the orchestrator to give the job back",
        lambda: (
            one(conn, "SELECT status FROM queue_engine.jobs WHERE id = %s", parent_id) == "queued"
        ),
        procs,
    )
    procs.append(spawn_worker(dsn, log_file=tmp_path / "worker2.log"))
    wait_for(
        "the retry to succeed",
        lambda: (
            one(conn, "SELECT status FROM queue_engine.jobs WHERE id = %s", parent_id)
            == "succeeded"
        ),
        procs,
    )
    assert one(conn, "SELECT attempt FROM queue_engine.jobs WHERE id = %s", parent_id) == 2
    assert followups_of(conn, parent_id) == [f"follow-up of job {parent_id} (attempt 2)"] * 2
    rows = conn.execute(
        "SELECT args, producer FROM queue_engine.jobs WHERE queue = 'fu.out' ORDER BY id"
    ).fetchall()
    assert rows == [({"n": 0}, f"job:{parent_id}"), ({"n": 1}, f"job:{parent_id}")]
