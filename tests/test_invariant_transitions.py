"""Invariant: the job state machine is guarded by the database itself.

``queue_engine.producer.jobs.ALLOWED_TRANSITIONS`` is exactly the ``job_transitions``
table; for every ordered pair of the six statuses, a direct ``UPDATE`` from
one to the other succeeds iff the pair is allowed (otherwise the guard trigger
raises ``CheckViolation`` and the row is unchanged); and the unique index on
``lock_key`` lets at most one job per key be ``running``.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors

from queue_engine.producer.jobs import (
    ACTIVE_STATUSES,
    ALLOWED_TRANSITIONS,
    FINISHED_STATUSES,
    RETRYABLE_STATUSES,
    JobStatus,
)

Conn = psycopg.Connection[Any]
STATUSES = [s.value for s in JobStatus]


def insert_job(conn: Conn, status: str, **columns: Any) -> int:
    names = ["task", "status", *columns]
    values = ["t", status, *columns.values()]
    placeholders = ", ".join(["%s"] * len(values))
    return conn.execute(
        f"INSERT INTO queue_engine.jobs ({', '.join(names)}) VALUES ({placeholders}) RETURNING id",
        values,
    ).fetchone()[0]


def status_of(conn: Conn, job_id: int) -> str:
    row = conn.execute("SELECT status FROM queue_engine.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row[0]


def test_status_enum_matches_the_schema() -> None:
    assert set(STATUSES) == {
        "waiting",
        "queued",
        "running",
        "succeeded",
        "failed",
        "canceled",
        "lost",
        "skipped",
    }
    assert set(JobStatus) == ACTIVE_STATUSES | FINISHED_STATUSES
    assert not ACTIVE_STATUSES & FINISHED_STATUSES
    # Retryable = the finished statuses that may go back to queued; the others are terminal.
    back_to_queued = {f for f, t in ALLOWED_TRANSITIONS if t is JobStatus.QUEUED}
    assert back_to_queued & FINISHED_STATUSES == RETRYABLE_STATUSES
    for status in FINISHED_STATUSES - RETRYABLE_STATUSES:
        assert not any(f is status for f, _ in ALLOWED_TRANSITIONS)


def test_allowed_transitions_equal_the_database_table(conn: Conn) -> None:
    rows = conn.execute(
        "SELECT from_status, to_status FROM queue_engine.job_transitions"
    ).fetchall()
    assert len(rows) == len(set(rows))
    assert {(JobStatus(f), JobStatus(t)) for f, t in rows} == set(ALLOWED_TRANSITIONS)
    # 10 for jobs, 11 more for workflows (0007), the hand-over (0009).
    assert len(ALLOWED_TRANSITIONS) == 22


def test_every_status_pair_is_guarded(conn: Conn) -> None:
    allowed = {(str(f), str(t)) for f, t in ALLOWED_TRANSITIONS}
    outcomes: dict[tuple[str, str], str] = {}
    for from_status, to_status in itertools.product(STATUSES, STATUSES):
        if from_status == to_status:
            continue
        job_id = insert_job(conn, from_status)
        try:
            conn.execute(
                "UPDATE queue_engine.jobs SET status = %s WHERE id = %s", (to_status, job_id)
            )
        except pg_errors.CheckViolation as exc:
            assert f"cannot go from {from_status} to {to_status}" in str(exc)
            outcomes[from_status, to_status] = "refused"
            assert status_of(conn, job_id) == from_status
        else:
            outcomes[from_status, to_status] = "allowed"
            assert status_of(conn, job_id) == to_status
    expected = {
        pair: ("allowed" if pair in allowed else "refused")
        for pair in itertools.product(STATUSES, STATUSES)
        if pair[0] != pair[1]
    }
    assert outcomes == expected
    assert sum(v == "allowed" for v in outcomes.values()) == 22


def test_updates_that_keep_the_status_are_not_guarded(conn: Conn) -> None:
    for status in STATUSES:
        job_id = insert_job(conn, status)
        conn.execute(
            "UPDATE queue_engine.jobs SET status = %s, priority = 7 WHERE id = %s",
            (status, job_id),
        )
        assert conn.execute(
            "SELECT status, priority FROM queue_engine.jobs WHERE id = %s", (job_id,)
        ).fetchone() == (status, 7)


def test_a_refused_transition_in_a_multi_row_update_changes_nothing(conn: Conn) -> None:
    ok = insert_job(conn, "queued")
    bad = insert_job(conn, "succeeded")
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'running' WHERE id = ANY(%s)", ([ok, bad],)
        )
    assert (status_of(conn, ok), status_of(conn, bad)) == ("queued", "succeeded")


def test_unknown_status_is_refused(conn: Conn) -> None:
    with pytest.raises(pg_errors.CheckViolation):
        insert_job(conn, "paused")
    job_id = insert_job(conn, "queued")
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute("UPDATE queue_engine.jobs SET status = 'done' WHERE id = %s", (job_id,))
    assert status_of(conn, job_id) == "queued"


def test_lock_key_allows_one_running_job(conn: Conn) -> None:
    first = insert_job(conn, "queued", lock_key="L")
    second = insert_job(conn, "queued", lock_key="L")
    other = insert_job(conn, "queued", lock_key="M")
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (first,))
    with pytest.raises(pg_errors.UniqueViolation):
        conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (second,))
    assert status_of(conn, second) == "queued"
    # A different key is independent.
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (other,))
    # A running job cannot be inserted next to another running job with the same key.
    with pytest.raises(pg_errors.UniqueViolation):
        insert_job(conn, "running", lock_key="L")
    # Jobs without a lock key never conflict.
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE lock_key IS NULL")
    insert_job(conn, "running")
    insert_job(conn, "running")
    # Once the holder finishes, the next one may run.
    conn.execute("UPDATE queue_engine.jobs SET status = 'succeeded' WHERE id = %s", (first,))
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (second,))
    running = conn.execute(
        "SELECT id FROM queue_engine.jobs WHERE lock_key = 'L' AND status = 'running'"
    ).fetchall()
    assert running == [(second,)]


def test_lock_key_race_between_two_transactions(dsn: str, conn: Conn) -> None:
    """The second claimer waits for the first's commit, then is refused."""
    first = insert_job(conn, "queued", lock_key="L")
    second = insert_job(conn, "queued", lock_key="L")
    outcome: list[BaseException | None] = []
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:
        b.execute("SET lock_timeout = '10s'")
        b_pid = b.info.backend_pid
        a.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (first,))

        def claim_second() -> None:
            try:
                b.execute(
                    "UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (second,)
                )
                outcome.append(None)
            except psycopg.Error as exc:
                outcome.append(exc)
            b.rollback()

        thread = threading.Thread(target=claim_second)
        thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait until b is blocked on a's row
            waiting = conn.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (b_pid,)
            ).fetchone()
            if waiting == ("Lock",):
                break
            time.sleep(0.01)
        else:
            pytest.fail("the second claim never waited for the first")
        a.commit()
        thread.join(timeout=15)
    assert len(outcome) == 1
    assert isinstance(outcome[0], pg_errors.UniqueViolation)
    assert (status_of(conn, first), status_of(conn, second)) == ("running", "queued")


def test_dedupe_key_allows_one_active_job(conn: Conn) -> None:
    first = insert_job(conn, "queued", dedupe_key="D")
    with pytest.raises(pg_errors.UniqueViolation):
        insert_job(conn, "queued", dedupe_key="D")
    with pytest.raises(pg_errors.UniqueViolation):
        insert_job(conn, "running", dedupe_key="D")
    for status in ("succeeded", "failed", "canceled", "lost"):
        insert_job(conn, status, dedupe_key="D")  # finished jobs do not hold the key
    conn.execute("UPDATE queue_engine.jobs SET status = 'canceled' WHERE id = %s", (first,))
    insert_job(conn, "queued", dedupe_key="D")
    active = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE dedupe_key = 'D'"
        " AND status IN ('queued', 'running')"
    ).fetchone()[0]
    assert active == 1


def test_idempotency_key_is_unique_in_every_status(conn: Conn) -> None:
    insert_job(conn, "succeeded", idempotency_key="I")
    for status in STATUSES:
        with pytest.raises(pg_errors.UniqueViolation):
            insert_job(conn, status, idempotency_key="I")
