"""Contract of ``give_back_jobs()`` (migration 0005), the sweeps' one give-back transition.

The reaper and fast recovery are tested through their statements
(``test_reaper.py``, ``test_dead_workers.py``); here the function's own edges:
a job that is no longer running is left alone, an empty batch does nothing,
the requeue event kind and note are the caller's, and each queue with a
requeued job gets one NOTIFY.
"""

from __future__ import annotations

from typing import Any

import psycopg

Conn = psycopg.Connection[Any]
GIVE_BACK = (
    "SELECT id, status, worker_id FROM queue_engine.give_back_jobs("
    "%s::bigint[], %s::text[], 'recovered', ': note', 'queue_engine.jobs') ORDER BY id"
)


def running_job(conn: Conn, queue: str = "g1", worker: str = "w-g") -> int:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task) VALUES (%s, 'give.back') RETURNING id",
        (queue,),
    ).fetchone()
    assert row is not None
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = %s, "
        "started_at = now(), lease_expires_at = now() WHERE id = %s",
        (worker, row[0]),
    )
    return int(row[0])


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
        "why a: note; queued again (attempt 1 of 5 spent)",
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
