"""Job rows made and read with plain SQL, for the tests of what the statements do to them.

A test of a sweep (the reaper, fast recovery, ``give_back_jobs()``) needs a job
that is already running without a worker having claimed it: :func:`running_job`
writes the row as a claim would. The readers take the test's autocommit
connection.
"""

from __future__ import annotations

from typing import Any

import psycopg

Conn = psycopg.Connection[Any]


def count_jobs(conn: Conn) -> int:
    """How many jobs the queue table holds (archived ones are elsewhere)."""
    row = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
    assert row is not None
    return int(row[0])


def running_job(
    conn: Conn,
    worker: str = "w-1",
    *,
    queue: str = "q1",
    task: str = "run.ning",
    attempt: int = 1,
    max_attempts: int | None = None,
    started: str = "0 seconds",
    heartbeat: str | None = "0 seconds",
    lease: str = "1 minute",
    cancel_requested: bool = False,
) -> int:
    """Insert a job and make it running for ``worker``, as a claim would (direct SQL).

    ``started`` and ``heartbeat`` are intervals before now (``heartbeat`` None:
    never beat); ``lease`` is the interval from now to the lease's end ("-1
    minute": expired). ``max_attempts`` None takes the task's default, as an
    enqueue that leaves it out does.
    """
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, max_attempts) VALUES (%s, %s, %s) "
        "RETURNING id",
        (queue, task, max_attempts),
    ).fetchone()
    assert row is not None
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = %s, claimed_by = %s, "
        "started_at = now() - %s::interval, heartbeat_at = now() - %s::interval, "
        "lease_expires_at = now() + %s::interval, cancel_requested = %s WHERE id = %s",
        (attempt, worker, started, heartbeat, lease, cancel_requested, row[0]),
    )
    return int(row[0])


def owner_pid(conn: Conn, job_id: int) -> int | None:
    """The OS pid of the worker process running the job, once it runs."""
    row = conn.execute(
        "SELECT w.pid FROM queue_engine.jobs j JOIN queue_engine.workers w ON w.id = j.claimed_by "
        "WHERE j.id = %s AND j.status = 'running'",
        (job_id,),
    ).fetchone()
    return None if row is None else int(row[0])


def job(conn: Conn, job_id: int) -> tuple[str, int, Any]:
    """The job's ``(status, attempt, result)``."""
    row = conn.execute(
        "SELECT status, attempt, result FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1]), row[2]


def event_kinds(conn: Conn, job_id: int) -> list[str]:
    """The kinds of the job's events, oldest first."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT kind FROM queue_engine.job_events WHERE job_id = %s ORDER BY id", (job_id,)
        ).fetchall()
    ]
