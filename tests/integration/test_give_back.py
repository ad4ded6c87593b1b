"""Contract of ``give_back_jobs()`` (migrations 0005, 0006), the sweeps' one give-back transition.

The reaper and fast recovery are tested through their statements
(``test_reaper.py``, ``test_dead_workers.py``); here the function's own edges:
a job that is no longer running is left alone, an empty batch does nothing,
the requeue event kind and note are the caller's, and each queue with a
requeued job gets one NOTIFY; the error and event count the deaths of the
job's run (poison jobs, migration 0006), an operator's retry starts the count
again, and a canceled job keeps its error.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support import jobs

Conn = psycopg.Connection[Any]
GIVE_BACK = (
    "SELECT id, status, worker_id FROM queue_engine.give_back_jobs("
    "%s::bigint[], %s::text[], 'recovered', ': note', 'queue_engine.jobs') ORDER BY id"
)


def running_job(conn: Conn, queue: str = "g1") -> int:
    """A job running for ``w-g`` on ``queue``, never beat, its lease ending now."""
    return jobs.running_job(
        conn, "w-g", queue=queue, task="give.back", heartbeat=None, lease="0 seconds"
    )


def test_running_jobs_go_back_with_the_callers_event_and_one_notify_per_queue(
    dsn: str, conn: Conn
) -> None:
    a, b, c = running_job(conn, "g1"), running_job(conn, "g1"), running_job(conn, "g2")
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute('LISTEN "queue_engine.jobs"')
        rows = conn.execute(GIVE_BACK, ([a, b, c], ["why a", "why b", "why c"])).fetchall()
        payloads = sorted(n.payload for n in listener.notifies(timeout=1, stop_after=2))
    assert rows == [(a, "queued", "w-g"), (b, "queued", "w-g"), (c, "queued", "w-g")]
    assert payloads == ["g1", "g2"]
    events = conn.execute(
        "SELECT job_id, kind, worker_id, message FROM queue_engine.job_events ORDER BY job_id"
    ).fetchall()
    assert events[0] == (
        a,
        "recovered",
        "w-g",
        "why a: note; the worker process died once while running this job "
        "(its database session ended); queued again (attempt 1 of 5 spent)",
    )
    assert [e[0] for e in events] == [a, b, c]


def test_a_job_no_longer_running_is_left_alone(conn: Conn) -> None:
    job = running_job(conn)
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'succeeded', finished_at = now() WHERE id = %s",
        (job,),
    )
    assert conn.execute(GIVE_BACK, ([job], ["late"])).fetchall() == []
    row = conn.execute(
        "SELECT status, claimed_by FROM queue_engine.jobs WHERE id = %s", (job,)
    ).fetchone()
    assert row == ("succeeded", "w-g")
    assert conn.execute("SELECT count(*) FROM queue_engine.job_events").fetchone() == (0,)


def test_an_empty_batch_does_nothing(conn: Conn) -> None:
    running_job(conn)
    assert conn.execute(GIVE_BACK, (None, None)).fetchall() == []
    assert conn.execute(GIVE_BACK, ([], [])).fetchall() == []
    row = conn.execute("SELECT status FROM queue_engine.jobs").fetchone()
    assert row == ("running",)


def give_back(conn: Conn, job: int, reason: str, kind: str) -> str:
    """Run the job's attempt (claim bookkeeping by hand), give it back as ``kind``; its status."""
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = attempt + 1, "
        "claimed_by = 'w-p', started_at = now(), lease_expires_at = now() WHERE id = %s",
        (job,),
    )
    row = conn.execute(
        "SELECT status FROM queue_engine.give_back_jobs("
        "ARRAY[%s]::bigint[], ARRAY[%s]::text[], %s, '', 'queue_engine.jobs')",
        (job, reason, kind),
    ).fetchone()
    assert row is not None
    return str(row[0])


def error_of(conn: Conn, job: int) -> str:
    row = conn.execute("SELECT error FROM queue_engine.jobs WHERE id = %s", (job,)).fetchone()
    assert row is not None
    return str(row[0])


def test_a_poison_job_ends_lost_with_its_deaths_counted(conn: Conn) -> None:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, max_attempts) VALUES ('p', 'poison', 3) "
        "RETURNING id"
    ).fetchone()
    assert row is not None
    job = int(row[0])
    assert give_back(conn, job, "session 1 ended", "recovered") == "queued"
    assert error_of(conn, job) == (
        "the worker process died once while running this job "
        "(its database session ended); last: session 1 ended"
    )
    assert give_back(conn, job, "session 2 ended", "recovered") == "queued"
    assert error_of(conn, job).startswith(
        "the worker process died twice while running this job "
        "(its database session ended each time); last: session 2 ended"
    )
    assert give_back(conn, job, "lease 3 expired", "reaped") == "lost"
    assert error_of(conn, job) == (
        "the worker process died 3 times while running this job "
        "(database session ended twice, lease expired once); last: lease 3 expired; "
        "attempts spent (3 of 3)"
    )
    events = conn.execute(
        "SELECT kind, message FROM queue_engine.job_events WHERE job_id = %s ORDER BY id", (job,)
    ).fetchall()
    assert [k for k, _ in events] == ["recovered", "recovered", "lost"]
    assert "died 3 times" in events[-1][1] and events[-1][1].endswith(
        "lost: attempts spent (3 of 3)"
    )

    # An operator's retry starts the count again.
    conn.execute(
        "INSERT INTO queue_engine.job_events (job_id, kind, from_status, to_status, attempt) "
        "VALUES (%s, 'retried', 'lost', 'queued', 0)",
        (job,),
    )
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'queued', attempt = 0, finished_at = NULL "
        "WHERE id = %s",
        (job,),
    )
    assert give_back(conn, job, "lease 4 expired", "reaped") == "queued"
    assert error_of(conn, job) == (
        "the worker process died once while running this job "
        "(its lease expired: dead, hung or cut off from the database); last: lease 4 expired"
    )


def test_a_canceled_job_keeps_its_error(conn: Conn) -> None:
    job = running_job(conn)
    conn.execute(
        "UPDATE queue_engine.jobs SET cancel_requested = true, error = 'earlier' WHERE id = %s",
        (job,),
    )
    assert conn.execute(GIVE_BACK, ([job], ["gone"])).fetchall() == [(job, "canceled", "w-g")]
    assert error_of(conn, job) == "earlier"
