"""Client.enqueue and the job-management calls (get, cancel, retry, list) on a real database.

Contracts: defaults of a new job; delay and run_at set ``available_at`` from the
database clock; idempotency keys return the existing job whatever its status;
dedupe keys return the active job only; every stored option round-trips; a
refused enqueue writes nothing; on a caller's connection the job exists iff the
caller commits; cancel/retry obey the state machine, write an event and NOTIFY.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from support.jobs import count_jobs

from queue_engine import AsyncClient, Client
from queue_engine.foundation.errors import InvalidTransition, JobNotFound, ValidationError
from queue_engine.producer.jobs import Job, JobStatus

Conn = psycopg.Connection[Any]
TOLERANCE = timedelta(seconds=2)


def db_now(conn: Conn) -> datetime:
    return conn.execute("SELECT now()").fetchone()[0]


def events(conn: Conn, job_id: int) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT kind, from_status, to_status, attempt, message FROM queue_engine.job_events"
        " WHERE job_id = %s ORDER BY id",
        (job_id,),
    ).fetchall()


def set_running(conn: Conn, job_id: int) -> None:
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'w',"
        " started_at = now() WHERE id = %s",
        (job_id,),
    )


def set_finished(conn: Conn, job_id: int, status: str) -> None:
    """Walk a queued job through running to a finished status (each step is guarded)."""
    set_running(conn, job_id)
    conn.execute(
        "UPDATE queue_engine.jobs SET status = %s, finished_at = now(), error = 'e' WHERE id = %s",
        (status, job_id),
    )


def listener(dsn: str, channel: str) -> Conn:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f'LISTEN "{channel}"')
    return conn


def drain(conn: Conn, timeout: float = 2.0) -> list[tuple[str, str]]:
    """Return the notifications received within ``timeout`` (stops early at the first)."""
    return [(n.channel, n.payload) for n in conn.notifies(timeout=timeout, stop_after=1)]


# --- enqueue ----------------------------------------------------------------------


def test_enqueue_defaults(client: Client, conn: Conn) -> None:
    before = db_now(conn)
    job = client.enqueue("send.email")
    after = db_now(conn)
    assert job.created is True
    assert job.id > 0
    assert job.task == "send.email"
    assert job.queue == "default"
    assert job.status is JobStatus.QUEUED
    assert job.priority == 100
    assert job.attempt == 0
    assert job.max_attempts == 5
    assert job.args == {}
    assert job.cancel_requested is False
    assert job.timeout_s is None
    assert job.idempotency_key is None and job.dedupe_key is None
    assert job.claimed_by is None and job.started_at is None and job.finished_at is None
    assert before <= job.available_at <= after
    assert before <= job.created_at <= after
    row = conn.execute(
        "SELECT status, priority, attempt, max_attempts, queue, task, args"
        " FROM queue_engine.jobs WHERE id = %s",
        (job.id,),
    ).fetchone()
    assert row == ("queued", 100, 0, 5, "default", "send.email", {})


def test_enqueue_stores_every_option(client: Client, conn: Conn) -> None:
    job = client.enqueue(
        "etl.load",
        queue="load.cbr",
        args={"file": "a.csv", "rows": [1, 2], "nested": {"x": None}},
        priority=7,
        max_attempts=3,
        timeout_s=90,
        lease_ttl_s=45,
        lock_key="table:a",
        partition_key="2024-01",
        producer="ingest@host1",
    )
    row = conn.execute(
        "SELECT queue, args, priority, max_attempts, timeout_s, lease_ttl_s, lock_key,"
        " partition_key, producer FROM queue_engine.jobs WHERE id = %s",
        (job.id,),
    ).fetchone()
    assert row == (
        "load.cbr",
        {"file": "a.csv", "rows": [1, 2], "nested": {"x": None}},
        7,
        3,
        90,
        45,
        "table:a",
        "2024-01",
        "ingest@host1",
    )
    assert (job.lock_key, job.partition_key, job.producer) == (
        "table:a",
        "2024-01",
        "ingest@host1",
    )


RICH_OPTIONS: dict[str, Any] = {
    "queue": "load.cbr",
    "args": {"zeta": 1.5, "a": [1, "two", None], "nested": {"x": True}, "big": 2**62},
    "priority": 7,
    "max_attempts": 3,
    "timeout_s": 90,
    "lease_ttl_s": 45,
    "lock_key": "table:a",
    "partition_key": "2024-01",
    "producer": "ingest@host1",
    "affinity_key": "model:a",
}


def test_enqueued_job_equals_the_stored_row(client: Client) -> None:
    # The plain enqueue builds its Job from what it sent plus the id and times
    # the server answers: every field must still equal the row as read back.
    for options in ({}, RICH_OPTIONS, {"delay": 30}, {"run_at": datetime(2030, 1, 2, tzinfo=UTC)}):
        job = client.enqueue("etl.load", **options)
        stored = client.get(job.id)
        assert job == dataclasses.replace(stored, created=True), options


def test_enqueue_on_a_caller_connection_with_a_dict_row_factory(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as own:
        job = Client(conn=own).enqueue("etl.load", **RICH_OPTIONS)
        assert job == dataclasses.replace(Client(conn=own).get(job.id), created=True)


def test_async_enqueued_job_equals_the_stored_row(dsn: str) -> None:
    async def body() -> list[tuple[Job, Job]]:
        async with AsyncClient(dsn) as client:
            pairs = []
            for options in ({}, RICH_OPTIONS):
                job = await client.enqueue("etl.load", **options)
                pairs.append((job, await client.get(job.id)))
            return pairs

    for job, stored in asyncio.run(body()):
        assert job == dataclasses.replace(stored, created=True)


def test_enqueue_uses_registered_task_defaults(client: Client) -> None:
    from queue_engine import task

    @task("defaults.db", queue="reports", max_attempts=11, timeout_s=300)
    def handler(args: dict[str, Any]) -> None:
        return None

    job = client.enqueue("defaults.db")
    assert (job.queue, job.max_attempts, job.timeout_s) == ("reports", 11, 300)


def test_enqueue_notifies_the_queue_channel(client: Client, dsn: str) -> None:
    with listener(dsn, "queue_engine.jobs") as listen:
        client.enqueue("t", queue="wake.me")
        assert drain(listen) == [("queue_engine.jobs", "wake.me")]


def test_delayed_enqueue_does_not_notify(client: Client, dsn: str) -> None:
    with listener(dsn, "queue_engine.jobs") as listen:
        client.enqueue("t", queue="later", delay=60)
        assert drain(listen, timeout=0.3) == []


def test_delay_sets_available_at_from_the_database_clock(client: Client, conn: Conn) -> None:
    for delay in (30, 2.5, timedelta(hours=1), 0):
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        before = db_now(conn)
        job = client.enqueue("t", delay=delay)
        after = db_now(conn)
        assert before + timedelta(seconds=seconds) <= job.available_at, delay
        assert job.available_at <= after + timedelta(seconds=seconds), delay
        # Both come from the same now() of the inserting transaction.
        assert job.available_at - job.created_at == timedelta(seconds=seconds), delay


def test_run_at_sets_available_at_exactly(client: Client) -> None:
    when = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    job = client.enqueue("t", run_at=when)
    assert job.available_at == when
    past = datetime(2020, 1, 1, tzinfo=UTC)
    assert client.enqueue("t", run_at=past).available_at == past


def test_run_at_in_another_timezone_is_the_same_instant(client: Client) -> None:
    tz = datetime.now(UTC).astimezone().tzinfo
    assert tz is not None
    when = datetime(2031, 1, 1, 12, 0, tzinfo=UTC)
    job = client.enqueue("t", run_at=when.astimezone(tz))
    assert job.available_at == when


def test_idempotency_key_returns_the_same_job(client: Client, conn: Conn) -> None:
    first = client.enqueue("t", args={"v": 1}, idempotency_key="order-1")
    second = client.enqueue("t", args={"v": 2}, idempotency_key="order-1")
    assert first.created is True
    assert second.created is False
    assert second.id == first.id
    assert second.args == {"v": 1}  # the existing job, not the new request
    assert count_jobs(conn) == 1


def test_idempotency_key_holds_after_the_job_is_canceled(client: Client, conn: Conn) -> None:
    first = client.enqueue("t", idempotency_key="once")
    client.cancel(first.id)
    again = client.enqueue("t", idempotency_key="once")
    assert again.id == first.id
    assert again.created is False
    assert again.status is JobStatus.CANCELED
    assert count_jobs(conn) == 1


def test_idempotency_key_holds_in_every_status(client: Client, conn: Conn) -> None:
    statuses = ["running", "succeeded", "failed", "lost"]
    for status in statuses:
        first = client.enqueue("t", idempotency_key=f"k-{status}")
        if status == "running":
            set_running(conn, first.id)
        else:
            set_finished(conn, first.id, status)
        again = client.enqueue("t", idempotency_key=f"k-{status}")
        assert (again.id, again.created, str(again.status)) == (first.id, False, status)
    assert count_jobs(conn) == len(statuses)


def test_different_idempotency_keys_create_different_jobs(client: Client, conn: Conn) -> None:
    a = client.enqueue("t", idempotency_key="a")
    b = client.enqueue("t", idempotency_key="b")
    assert a.id != b.id
    assert a.created and b.created
    assert count_jobs(conn) == 2


def test_dedupe_key_returns_the_active_job(client: Client, conn: Conn) -> None:
    first = client.enqueue("t", args={"v": 1}, dedupe_key="refresh:42")
    second = client.enqueue("t", args={"v": 2}, dedupe_key="refresh:42")
    assert (second.id, second.created, second.args) == (first.id, False, {"v": 1})
    set_running(conn, first.id)
    third = client.enqueue("t", dedupe_key="refresh:42")
    assert (third.id, third.created, third.status) == (first.id, False, JobStatus.RUNNING)
    assert count_jobs(conn) == 1


def test_dedupe_key_is_free_again_once_the_job_is_canceled(client: Client, conn: Conn) -> None:
    first = client.enqueue("t", dedupe_key="refresh")
    client.cancel(first.id)
    second = client.enqueue("t", dedupe_key="refresh")
    assert second.created is True
    assert second.id != first.id
    assert second.status is JobStatus.QUEUED
    third = client.enqueue("t", dedupe_key="refresh")
    assert (third.id, third.created) == (second.id, False)
    assert count_jobs(conn) == 2


def test_dedupe_key_is_free_once_the_job_finished(client: Client, conn: Conn) -> None:
    for status in ("succeeded", "failed", "lost"):
        first = client.enqueue("t", dedupe_key=f"d-{status}")
        set_finished(conn, first.id, status)
        second = client.enqueue("t", dedupe_key=f"d-{status}")
        assert second.created is True, status
        assert second.id != first.id, status
    assert count_jobs(conn) == 6


def test_both_keys(client: Client, conn: Conn) -> None:
    first = client.enqueue("t", idempotency_key="i1", dedupe_key="d1")
    # Same idempotency key: the same job, whatever the dedupe key says.
    assert client.enqueue("t", idempotency_key="i1", dedupe_key="other").id == first.id
    # A new idempotency key but a taken dedupe key: the active job.
    same_dedupe = client.enqueue("t", idempotency_key="i2", dedupe_key="d1")
    assert (same_dedupe.id, same_dedupe.created) == (first.id, False)
    assert count_jobs(conn) == 1
    # Once the first finished, its idempotency key still holds but its dedupe key is free.
    client.cancel(first.id)
    assert client.enqueue("t", idempotency_key="i1", dedupe_key="d1").id == first.id
    fresh = client.enqueue("t", idempotency_key="i3", dedupe_key="d1")
    assert fresh.created is True
    assert fresh.id != first.id
    assert count_jobs(conn) == 2


def test_idempotency_key_wins_over_dedupe_key_when_both_match_different_jobs(
    client: Client, conn: Conn
) -> None:
    by_idem = client.enqueue("t", idempotency_key="I")
    by_dedupe = client.enqueue("t", dedupe_key="D")
    got = client.enqueue("t", idempotency_key="I", dedupe_key="D")
    assert got.id == by_idem.id != by_dedupe.id
    assert got.created is False
    assert count_jobs(conn) == 2


BAD_OPTIONS: list[dict[str, Any]] = [
    {"task": "bad task"},
    {"task": "t", "queue": "bad queue"},
    {"task": "t", "args": [1, 2]},
    {"task": "t", "args": {"x": object()}},
    {"task": "t", "args": {"big": "x" * (1024 * 1024)}},
    {"task": "t", "priority": 1001},
    {"task": "t", "priority": -1},
    {"task": "t", "max_attempts": 0},
    {"task": "t", "run_at": datetime(2030, 1, 1)},  # noqa: DTZ001
    {"task": "t", "run_at": datetime(2030, 1, 1, tzinfo=UTC), "delay": 1},
    {"task": "t", "delay": -5},
    {"task": "t", "delay": float("nan")},
    {"task": "t", "idempotency_key": "k" * 256},
    {"task": "t", "dedupe_key": ""},
    {"task": "t", "lock_key": "k" * 256},
    {"task": "t", "queue": "abc\n"},
]


def test_validation_errors_write_nothing(client: Client, conn: Conn) -> None:
    for options in BAD_OPTIONS:
        with pytest.raises(ValidationError):
            client.enqueue(**options)
    assert count_jobs(conn) == 0
    assert conn.execute("SELECT count(*) FROM queue_engine.job_events").fetchone()[0] == 0


# --- the caller's transaction -----------------------------------------------------


def test_enqueue_on_caller_connection_rolled_back_leaves_no_job(
    client: Client, conn: Conn, dsn: str
) -> None:
    with psycopg.connect(dsn) as tx:
        assert tx.autocommit is False
        job = client.enqueue("t", conn=tx, idempotency_key="tx-1")
        assert job.created is True
        # Invisible to others until commit.
        assert count_jobs(conn) == 0
        tx.rollback()
    assert count_jobs(conn) == 0
    # The key was never taken: a new enqueue creates a job.
    assert client.enqueue("t", idempotency_key="tx-1").created is True


def test_enqueue_on_caller_connection_committed_exists(
    client: Client, conn: Conn, dsn: str
) -> None:
    with psycopg.connect(dsn) as tx:
        job = client.enqueue("t", conn=tx, args={"a": 1})
        tx.execute("SELECT 1")  # the caller's own work in the same transaction
        assert count_jobs(conn) == 0
        tx.commit()
    assert count_jobs(conn) == 1
    assert client.get(job.id).args == {"a": 1}


def test_client_bound_to_a_connection_follows_its_transaction(conn: Conn, dsn: str) -> None:
    with psycopg.connect(dsn) as tx:
        bound = Client(conn=tx)
        rolled_back = bound.enqueue("t", args={"n": 1})
        assert bound.get(rolled_back.id).id == rolled_back.id  # visible inside the transaction
        tx.rollback()
        assert count_jobs(conn) == 0
        with pytest.raises(JobNotFound):
            bound.get(rolled_back.id)
        kept = bound.enqueue("t", args={"n": 2})
        tx.commit()
        bound.close()  # does not close the caller's connection
        assert not tx.closed
    assert conn.execute("SELECT id, args FROM queue_engine.jobs").fetchall() == [
        (kept.id, {"n": 2})
    ]


def test_enqueue_in_a_transaction_block_of_the_caller(client: Client, conn: Conn, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        with pytest.raises(RuntimeError, match="abort"), c.transaction():
            client.enqueue("t", conn=c)
            raise RuntimeError("abort")
        assert count_jobs(conn) == 0
        with c.transaction():
            client.enqueue("t", conn=c)
    assert count_jobs(conn) == 1


# --- get / cancel -----------------------------------------------------------------


def test_get_returns_the_job(client: Client) -> None:
    job = client.enqueue("t", args={"k": "v"})
    got = client.get(job.id)
    assert got.id == job.id
    assert got.args == {"k": "v"}
    assert got.created is False


def test_get_unknown_id_raises_job_not_found(client: Client) -> None:
    with pytest.raises(JobNotFound, match="job 999999 not found") as info:
        client.get(999999)
    assert info.value.job_id == 999999


def test_cancel_queued_job(client: Client, conn: Conn) -> None:
    job = client.enqueue("t")
    before = db_now(conn)
    canceled = client.cancel(job.id, message="no longer needed")
    assert canceled.status is JobStatus.CANCELED
    assert canceled.finished_at is not None
    assert canceled.finished_at >= before
    assert canceled.cancel_requested is True
    assert client.get(job.id).status is JobStatus.CANCELED
    assert events(conn, job.id) == [("canceled", "queued", "canceled", 0, "no longer needed")]


def test_cancel_running_job_requests_cancellation(client: Client, conn: Conn, dsn: str) -> None:
    job = client.enqueue("t")
    set_running(conn, job.id)
    with listener(dsn, "queue_engine.cancel") as listen:
        after = client.cancel(job.id)
        assert drain(listen) == [("queue_engine.cancel", str(job.id))]
    assert after.status is JobStatus.RUNNING
    assert after.cancel_requested is True
    assert after.finished_at is None
    row = conn.execute(
        "SELECT status, cancel_requested, claimed_by, attempt FROM queue_engine.jobs WHERE id = %s",
        (job.id,),
    ).fetchone()
    assert row == ("running", True, "w", 1)
    assert events(conn, job.id) == [
        ("cancel_requested", "running", "running", 1, "canceled by client")
    ]


def test_cancel_queued_job_sends_no_cancel_notify(client: Client, dsn: str) -> None:
    job = client.enqueue("t")
    with listener(dsn, "queue_engine.cancel") as listen:
        client.cancel(job.id)
        assert drain(listen, timeout=0.3) == []


def test_cancel_finished_job_is_an_invalid_transition(client: Client, conn: Conn) -> None:
    for status in ("succeeded", "failed", "lost", "canceled"):
        job = client.enqueue("t")
        if status == "canceled":
            client.cancel(job.id)
        else:
            set_finished(conn, job.id, status)
        n_events = len(events(conn, job.id))
        with pytest.raises(InvalidTransition, match=f"already finished \\({status}\\)"):
            client.cancel(job.id)
        assert str(client.get(job.id).status) == status
        assert len(events(conn, job.id)) == n_events


def test_cancel_unknown_job(client: Client) -> None:
    with pytest.raises(JobNotFound):
        client.cancel(424242)


def test_cancel_and_get_refuse_bad_ids(client: Client) -> None:
    for bad in (0, -1):
        with pytest.raises(ValidationError):
            client.cancel(bad)
        with pytest.raises(ValidationError):
            client.get(bad)


# --- retry ------------------------------------------------------------------------


def test_retry_puts_the_job_back_in_its_queue(client: Client, conn: Conn, dsn: str) -> None:
    with listener(dsn, "queue_engine.jobs") as listen:
        for status in ("failed", "canceled", "lost"):
            queue = f"retry.{status}"
            job = client.enqueue("t", queue=queue, delay=3600)  # delayed: no insert NOTIFY
            if status == "canceled":
                client.cancel(job.id)
            else:
                set_finished(conn, job.id, status)
            before = db_now(conn)
            retried = client.retry(job.id, message="try again")
            assert drain(listen) == [("queue_engine.jobs", queue)]
            assert retried.id == job.id
            assert retried.status is JobStatus.QUEUED
            assert retried.attempt == 0
            assert retried.cancel_requested is False
            assert retried.claimed_by is None
            assert retried.started_at is None and retried.finished_at is None
            assert retried.available_at >= before  # runnable now, not at the old delay
            assert events(conn, job.id)[-1] == ("retried", status, "queued", 0, "try again")
            # And it can be canceled again like any queued job.
            assert client.cancel(job.id).status is JobStatus.CANCELED


def test_retry_of_a_non_retryable_job_is_an_invalid_transition(client: Client, conn: Conn) -> None:
    for status in ("queued", "running", "succeeded"):
        job = client.enqueue("t")
        if status == "running":
            set_running(conn, job.id)
        elif status == "succeeded":
            set_finished(conn, job.id, status)
        with pytest.raises(InvalidTransition, match=f"it is {status}"):
            client.retry(job.id)
        assert str(client.get(job.id).status) == status
    assert conn.execute(
        "SELECT count(*) FROM queue_engine.job_events WHERE kind = 'retried'"
    ).fetchone() == (0,)


def test_retry_unknown_job(client: Client) -> None:
    with pytest.raises(JobNotFound):
        client.retry(31337)


def test_retry_refused_while_another_active_job_holds_the_dedupe_key(
    client: Client, conn: Conn
) -> None:
    first = client.enqueue("t", dedupe_key="d")
    client.cancel(first.id)
    second = client.enqueue("t", dedupe_key="d")
    assert second.id != first.id
    with pytest.raises(InvalidTransition, match="dedupe_key"):
        client.retry(first.id)
    assert client.get(first.id).status is JobStatus.CANCELED
    assert [e[0] for e in events(conn, first.id)] == ["canceled"]
    # Once the other job is gone too, the retry is allowed.
    client.cancel(second.id)
    assert client.retry(first.id).status is JobStatus.QUEUED


# --- list -------------------------------------------------------------------------


def test_list_filters_and_orders_newest_first(client: Client, conn: Conn) -> None:
    a = client.enqueue("task.a", queue="q1")
    b = client.enqueue("task.b", queue="q1")
    c = client.enqueue("task.a", queue="q2")
    d = client.enqueue("task.b", queue="q2")
    client.cancel(b.id)
    set_finished(conn, d.id, "failed")

    assert [j.id for j in client.list()] == [d.id, c.id, b.id, a.id]
    assert [j.id for j in client.list(queue="q1")] == [b.id, a.id]
    assert [j.id for j in client.list(status="queued")] == [c.id, a.id]
    assert [j.id for j in client.list(status="canceled")] == [b.id]
    assert [j.id for j in client.list(status="failed")] == [d.id]
    assert [j.id for j in client.list(task="task.a")] == [c.id, a.id]
    assert [j.id for j in client.list(queue="q2", task="task.b", status="failed")] == [d.id]
    assert client.list(queue="q3") == []
    assert client.list(status="succeeded") == []
    assert [j.id for j in client.list(limit=2)] == [d.id, c.id]
    assert all(j.created is False for j in client.list())


def age(conn: Conn, job_id: int, seconds: float) -> None:
    """Make a job look created ``seconds`` ago (by the database clock)."""
    conn.execute(
        "UPDATE queue_engine.jobs SET created_at = now() - make_interval(secs => %s) WHERE id = %s",
        (seconds, job_id),
    )


def test_list_older_than_filters_by_creation_age(client: Client, conn: Conn) -> None:
    day_old = client.enqueue("task.a", queue="q1").id
    hour_old = client.enqueue("task.a", queue="q1").id
    minute_old = client.enqueue("task.b", queue="q2").id
    fresh = client.enqueue("task.a", queue="q1").id
    age(conn, day_old, 86_400 + 5)
    age(conn, hour_old, 3_600 + 5)
    age(conn, minute_old, 65)

    def ids(**filters: Any) -> list[int]:
        return [j.id for j in client.list(**filters)]

    assert ids(older_than_s=0) == [fresh, minute_old, hour_old, day_old]
    assert ids(older_than_s=30) == [minute_old, hour_old, day_old]
    assert ids(older_than_s=300) == [hour_old, day_old]
    assert ids(older_than_s=7_200.0) == [day_old]
    assert ids(older_than_s=2 * 86_400) == []
    assert ids(older_than_s=30, queue="q1") == [hour_old, day_old]
    assert ids(older_than_s=30, task="task.b") == [minute_old]
    assert ids(older_than_s=30, limit=1) == [minute_old]
    assert fresh in ids(older_than_s=None)
    for bad in (-1, float("nan"), float("inf"), True, "1h"):
        with pytest.raises(ValidationError, match="older_than_s"):
            client.list(older_than_s=bad)


def test_list_accepts_a_status_enum(client: Client) -> None:
    job = client.enqueue("t")
    assert [j.id for j in client.list(status=JobStatus.QUEUED)] == [job.id]


def test_list_refuses_bad_filters(client: Client) -> None:
    client.enqueue("t")
    with pytest.raises(ValidationError, match="unknown status 'done'"):
        client.list(status="done")
    bad: list[dict[str, Any]] = [
        {"status": "QUEUED"},
        {"queue": "bad queue"},
        {"limit": 0},
        {"limit": -1},
        {"limit": 10_001},
    ]
    for kwargs in bad:
        with pytest.raises(ValidationError):
            client.list(**kwargs)
