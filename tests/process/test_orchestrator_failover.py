"""Contract of leader election between real ``queue-orchestrator`` processes.

The first orchestrator leads; a second one stands by. When the leader is
killed with SIGKILL (no chance to clean up), its session ends, the standby
takes the lock within its retry cadence and reaps a job whose lease expired.
When the leader's database session is cut under it, or Postgres restarts, it
steps down and, once reconnected, leads again and reaps. SIGTERM stops an orchestrator cleanly (exit 0, row
marked stopped). Waits are bounded polls, not timing assertions.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.orchestrators import WAIT_S, count_in, procs, role_of, spawn, stop, wait_for

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here


def expired_running_job(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task) VALUES ('failover', 'x') RETURNING id"
    ).fetchone()
    assert row is not None
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'gone', "
        "started_at = now(), lease_expires_at = now() - interval '1 second' WHERE id = %s",
        (row[0],),
    )
    return int(row[0])


def job_status(conn: psycopg.Connection[Any], job_id: int) -> str:
    row = conn.execute("SELECT status FROM queue_engine.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return str(row[0])


def test_standby_takes_over_after_the_leader_is_killed(
    dsn: str, conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    a = spawn(dsn, log_a)
    procs.append(a)
    wait_for("A to lead", lambda: role_of(conn, a.pid) == "leader", procs)
    assert count_in(log_a, "orchestrator.leader_acquired") == 1

    b = spawn(dsn, log_b)
    procs.append(b)
    wait_for("B to stand by", lambda: role_of(conn, b.pid) == "standby", procs)
    assert count_in(log_b, "orchestrator.leader_acquired") == 0

    a.kill()  # SIGKILL: no clean-up, the server ends its session
    assert a.wait(timeout=WAIT_S) == -signal.SIGKILL
    job = expired_running_job(conn)

    wait_for("B to lead", lambda: count_in(log_b, "orchestrator.leader_acquired") == 1, [b])
    wait_for("B to reap the job", lambda: job_status(conn, job) == "queued", [b])
    kinds = conn.execute(
        "SELECT kind, message FROM queue_engine.job_events WHERE job_id = %s", (job,)
    ).fetchall()
    assert [k for k, _ in kinds] == ["reaped"]
    assert "(worker gone)" in kinds[0][1]
    wait_for("reaper.requeued in B's log", lambda: count_in(log_b, "reaper.requeued"), [b])

    assert stop(b) == 0
    assert count_in(log_b, "orchestrator.stopped") == 1
    assert role_of(conn, b.pid) == "stopped"


def test_leader_steps_down_when_its_session_is_cut_and_leads_again(
    dsn: str, conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "o.log"
    orch = spawn(dsn, log)
    procs.append(orch)
    wait_for("it to lead", lambda: count_in(log, "orchestrator.leader_acquired") == 1, procs)
    # Cut the session that holds the leader lock (as a network drop or a DBA would).
    (cut,) = conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_locks "
        "WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
        "AND ((classid::bigint << 32) | objid::bigint) = hashtextextended('queue_engine.leader', 0)"
    ).fetchall()
    assert cut == (True,)
    wait_for("it to step down", lambda: count_in(log, "orchestrator.leader_lost") == 1, procs)
    wait_for("it to lead again", lambda: count_in(log, "orchestrator.leader_acquired") == 2, procs)
    job = expired_running_job(conn)
    wait_for("the job to be reaped", lambda: job_status(conn, job) == "queued", procs)
    assert stop(orch) == 0


def test_leader_survives_a_postgres_restart(
    pg_server, dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    if pg_server.embedded is None:
        pytest.skip("needs the embedded server (QUEUE_ENGINE_TEST_DSN is set)")
    log = tmp_path / "o.log"
    orch = spawn(dsn, log)
    procs.append(orch)
    wait_for("it to lead", lambda: count_in(log, "orchestrator.leader_acquired") == 1, procs)
    pg_server.embedded.restart()  # every session is cut; the process must not exit
    wait_for("it to step down", lambda: count_in(log, "orchestrator.leader_lost") == 1, procs)
    wait_for("it to lead again", lambda: count_in(log, "orchestrator.leader_acquired") == 2, procs)
    with psycopg.connect(dsn, autocommit=True) as conn:
        job = expired_running_job(conn)
        wait_for("the job to be reaped", lambda: job_status(conn, job) == "queued", procs)
    assert stop(orch) == 0
