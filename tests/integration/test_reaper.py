"""Contract of the lease reaper (``Reaper.run_once`` / ``sql/reap_expired.sql``).

A running job whose lease is in the past goes back to ``queued`` (available
now) while attempts remain, to ``lost`` (finished, error says why) when the
expired attempt was its last, and to ``canceled`` if a cancel was requested;
each move writes a ``job_events`` row naming the expired lease and its worker;
one NOTIFY per queue with re-queued jobs is sent on ``<schema>.jobs``; jobs with
a live lease, jobs in other statuses and rows locked by someone else are left
alone; one statement moves at most ``batch_size`` rows and one run at most
``max_batches`` batches. Jobs are made ``running`` with direct SQL, and time is
pinned through the reaper's ``now`` where it matters.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import psycopg
from psycopg import sql
from support import jobs

from queue_engine.orchestrator.reaper import Reaper

SCHEMA = "queue_engine"
#: ``running_job(conn, worker=..., lease=...)``: a job claimed 5 minutes ago, last beat 2
#: minutes ago, its lease expired a minute ago unless ``lease`` says otherwise.
running_job = partial(
    jobs.running_job,
    task="reap.me",
    max_attempts=3,
    started="5 minutes",
    heartbeat="2 minutes",
    lease="-1 minute",
)


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.execute(
        "SELECT status, attempt, claimed_by, lease_expires_at, available_at <= now() AS available, "
        "finished_at, duration_ms, error FROM queue_engine.jobs WHERE id = %s",
        (job_id,),
    )
    names = [d.name for d in cur.description or []]
    values = cur.fetchone()
    assert values is not None
    return dict(zip(names, values, strict=True))


def events(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT kind, from_status, to_status, attempt, worker_id, message "
        "FROM queue_engine.job_events WHERE job_id = %s ORDER BY id",
        (job_id,),
    ).fetchall()


def listen(dsn: str) -> psycopg.Connection[Any]:
    listener = psycopg.connect(dsn, autocommit=True)
    listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(f"{SCHEMA}.jobs")))
    return listener


def test_expired_jobs_are_requeued_or_lost_by_attempts_with_events(dsn: str, conn) -> None:
    retryable = running_job(conn, attempt=1, max_attempts=3, worker="w-1")
    last_try = running_job(conn, attempt=3, max_attempts=3, worker="w-2")
    reaper = Reaper(dsn, SCHEMA)
    try:
        result = reaper.run_once()
    finally:
        reaper.db.reset()

    assert [j.id for j in result.requeued] == [retryable]
    assert [j.id for j in result.lost] == [last_try]
    assert result.canceled == []
    assert result.did_work and result.total == 2 and result.batches == 1

    requeued = job_row(conn, retryable)
    assert requeued["status"] == "queued"
    assert requeued["attempt"] == 1  # the claim counts attempts, the reaper does not
    assert requeued["claimed_by"] is None and requeued["lease_expires_at"] is None
    assert requeued["available"] is True
    assert requeued["finished_at"] is None

    lost = job_row(conn, last_try)
    assert lost["status"] == "lost"
    assert lost["finished_at"] is not None
    assert lost["duration_ms"] >= 5 * 60 * 1000
    assert "lease expired at" in lost["error"] and "(worker w-2)" in lost["error"]

    (ev,) = events(conn, retryable)
    assert ev[:5] == ("reaped", "running", "queued", 1, "w-1")
    assert ev[5].startswith("lease expired at ") and "(worker w-1)" in ev[5]
    assert "queued again" in ev[5]
    (ev,) = events(conn, last_try)
    assert ev[:5] == ("lost", "running", "lost", 3, "w-2")
    assert "attempts spent (3 of 3)" in ev[5]


def test_the_reason_says_what_the_workers_row_knows(dsn: str, conn) -> None:
    """Gone, flagged silent, or when it last heartbeated; nothing when the row is gone."""
    conn.execute(
        "INSERT INTO queue_engine.workers (id, queue, host, pid, state, stopped_at, "
        "heartbeat_at, flagged_dead_at) VALUES "
        "('w-gone', 'q1', 'h', 1, 'gone', now(), now() - interval '70 seconds', NULL), "
        "('w-hung', 'q1', 'h', 2, 'busy', NULL, now() - interval '70 seconds', now()), "
        "('w-beat', 'q1', 'h', 3, 'busy', NULL, now() - interval '70 seconds', NULL)"
    )
    jobs = {
        w: running_job(conn, worker=w, attempt=3, max_attempts=3)
        for w in ("w-gone", "w-hung", "w-beat", "w-none")
    }
    reaper = Reaper(dsn, SCHEMA)
    try:
        assert len(reaper.run_once().lost) == 4
    finally:
        reaper.db.reset()
    errors = {w: job_row(conn, j)["error"] for w, j in jobs.items()}
    assert "(worker w-gone: gone, its database session ended)" in errors["w-gone"]
    assert "(worker w-hung: silent for 70" in errors["w-hung"]
    assert "(flagged dead), hung or cut off)" in errors["w-hung"]
    assert "(worker w-beat: last heartbeat 70" in errors["w-beat"]
    assert "(worker w-none)" in errors["w-none"]
    for error in errors.values():
        assert error.startswith(
            "the worker process died once while running this job (its lease expired: "
            "dead, hung or cut off from the database); last: lease expired at "
        )
        assert error.endswith("; attempts spent (3 of 3)")


def test_cancel_requested_job_with_expired_lease_is_canceled(dsn: str, conn) -> None:
    job = running_job(conn, cancel_requested=True)
    reaper = Reaper(dsn, SCHEMA)
    result = reaper.run_once()
    reaper.db.reset()
    assert [j.id for j in result.canceled] == [job]
    assert job_row(conn, job)["status"] == "canceled"
    assert events(conn, job)[0][:3] == ("canceled", "running", "canceled")


def test_live_leases_and_other_statuses_are_untouched(dsn: str, conn) -> None:
    live = running_job(conn, lease="+1 minute")
    no_lease = running_job(conn)
    conn.execute("UPDATE queue_engine.jobs SET lease_expires_at = NULL WHERE id = %s", (no_lease,))
    queued = conn.execute(
        "INSERT INTO queue_engine.jobs (task, available_at) VALUES ('x', now() - interval '1 hour') "
        "RETURNING id"
    ).fetchone()[0]
    reaper = Reaper(dsn, SCHEMA)
    result = reaper.run_once()
    reaper.db.reset()
    assert not result.did_work
    assert job_row(conn, live)["status"] == "running"
    assert job_row(conn, no_lease)["status"] == "running"
    assert job_row(conn, queued)["status"] == "queued"
    assert events(conn, live) == [] and events(conn, queued) == []


def test_pinned_now_decides_what_is_expired(dsn: str, conn) -> None:
    job = running_job(conn, lease="+1 hour")
    future = datetime.now(UTC) + timedelta(hours=2)
    past = datetime.now(UTC) - timedelta(hours=2)
    reaper = Reaper(dsn, SCHEMA, now=lambda: past)
    assert not reaper.run_once().did_work
    reaper.now = lambda: future
    assert [j.id for j in reaper.run_once().requeued] == [job]
    reaper.db.reset()


def test_one_notify_per_queue_with_requeued_jobs(dsn: str, conn) -> None:
    running_job(conn, queue="alpha")
    running_job(conn, queue="alpha")
    running_job(conn, queue="beta")
    running_job(conn, queue="gamma", attempt=3, max_attempts=3)  # lost: nothing to wake
    listener = listen(dsn)
    try:
        reaper = Reaper(dsn, SCHEMA)
        result = reaper.run_once()
        reaper.db.reset()
        assert len(result.requeued) == 3 and len(result.lost) == 1
        # A sentinel committed after the reaper's statement arrives after all of its
        # notifications (delivery is in commit order), so reading up to it sees them all.
        conn.execute("SELECT pg_notify('queue_engine.jobs', 'sentinel')")
        received = []
        for n in listener.notifies(timeout=30.0):
            if n.payload == "sentinel":
                break
            received.append((n.channel, n.payload))
    finally:
        listener.close()
    assert sorted(received) == [("queue_engine.jobs", "alpha"), ("queue_engine.jobs", "beta")]


def test_batches_are_bounded_per_statement_and_per_run(dsn: str, conn) -> None:
    jobs = [running_job(conn, lease=f"-{10 - i} minutes") for i in range(5)]
    reaper = Reaper(dsn, SCHEMA, batch_size=2, max_batches=2)
    try:
        assert len(reaper.reap_batch(reaper.db.get())) == 2  # one statement, at most 2 rows
        first = reaper.run_once()
        assert (first.batches, first.total) == (2, 3)  # 2 + 1: the second batch was short
        assert reaper.run_once().total == 0
    finally:
        reaper.db.reset()
    statuses = {job_row(conn, j)["status"] for j in jobs}
    assert statuses == {"queued"}

    more = [running_job(conn) for _ in range(5)]
    reaper = Reaper(dsn, SCHEMA, batch_size=2, max_batches=2)
    try:
        run = reaper.run_once()
        assert (run.batches, run.total) == (2, 4)  # bounded: one job waits for the next run
        run = reaper.run_once()
        assert (run.batches, run.total) == (1, 1)
    finally:
        reaper.db.reset()
    assert {job_row(conn, j)["status"] for j in more} == {"queued"}


def test_rows_locked_by_another_transaction_are_skipped(dsn: str, conn) -> None:
    job = running_job(conn)
    with psycopg.connect(dsn) as other:  # not autocommit: holds the row lock until commit
        other.execute("SELECT id FROM queue_engine.jobs WHERE id = %s FOR UPDATE", (job,))
        reaper = Reaper(dsn, SCHEMA)
        assert not reaper.run_once().did_work  # skipped, not blocked
        other.commit()
        assert [j.id for j in reaper.run_once().requeued] == [job]
        reaper.db.reset()
