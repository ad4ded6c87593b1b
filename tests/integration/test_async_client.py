"""AsyncClient: the producer contracts of Client hold through the asyncio API.

Contracts: enqueue defaults and options, idempotency and dedupe keys,
enqueue_many ids in input order (plain and keyed), get/cancel/retry/list with
their refusals and NOTIFYs, validation writing nothing, and on a caller's
``psycopg.AsyncConnection`` the job exists iff the caller commits.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import psycopg
import pytest
from support.jobs import count_jobs

from queue_engine import AsyncClient
from queue_engine.foundation.errors import InvalidTransition, JobNotFound, ValidationError
from queue_engine.producer.jobs import JobStatus

Conn = psycopg.Connection[Any]
T = TypeVar("T")


def run_with_client(dsn: str, body: Callable[[AsyncClient], Awaitable[T]]) -> T:
    async def main() -> T:
        async with AsyncClient(dsn) as client:
            return await body(client)

    return asyncio.run(main())


def test_enqueue_defaults_and_options(dsn: str, conn: Conn) -> None:
    when = datetime(2033, 3, 3, tzinfo=UTC)

    async def body(client: AsyncClient) -> None:
        job = await client.enqueue("async.task")
        assert job.created is True
        assert (job.status, job.priority, job.attempt, job.max_attempts, job.queue) == (
            JobStatus.QUEUED,
            100,
            0,
            5,
            "default",
        )
        assert job.available_at == job.created_at  # runnable at once, by the database clock
        other = await client.enqueue(
            "async.task",
            queue="aq",
            args={"a": [1]},
            priority=3,
            run_at=when,
            lock_key="L",
            partition_key="P",
            producer="prod",
        )
        assert other.available_at == when
        assert (other.queue, other.args, other.priority) == ("aq", {"a": [1]}, 3)
        assert (other.lock_key, other.partition_key, other.producer) == ("L", "P", "prod")

    run_with_client(dsn, body)
    assert count_jobs(conn) == 2


def test_delay_uses_the_database_clock(dsn: str, conn: Conn) -> None:
    async def body(client: AsyncClient) -> None:
        job = await client.enqueue("t", delay=90)
        assert (job.available_at - job.created_at).total_seconds() == 90

    run_with_client(dsn, body)


def test_idempotency_and_dedupe(dsn: str, conn: Conn) -> None:
    async def body(client: AsyncClient) -> None:
        first = await client.enqueue("t", args={"v": 1}, idempotency_key="k")
        again = await client.enqueue("t", args={"v": 2}, idempotency_key="k")
        assert (again.id, again.created, again.args) == (first.id, False, {"v": 1})
        await client.cancel(first.id)
        after_cancel = await client.enqueue("t", idempotency_key="k")
        assert (after_cancel.id, after_cancel.created) == (first.id, False)

        d1 = await client.enqueue("t", dedupe_key="d")
        d2 = await client.enqueue("t", dedupe_key="d")
        assert (d2.id, d2.created) == (d1.id, False)
        await client.cancel(d1.id)
        d3 = await client.enqueue("t", dedupe_key="d")
        assert d3.created is True
        assert d3.id != d1.id

    run_with_client(dsn, body)
    assert count_jobs(conn) == 3


def test_concurrent_tasks_with_one_key_get_one_job(dsn: str, conn: Conn) -> None:
    async def body(client: AsyncClient) -> set[int]:
        jobs = await asyncio.gather(
            *(client.enqueue("t", idempotency_key="same") for _ in range(20))
        )
        assert sum(j.created for j in jobs) == 1
        return {j.id for j in jobs}

    assert len(run_with_client(dsn, body)) == 1
    assert count_jobs(conn) == 1


def test_validation_errors_write_nothing(dsn: str, conn: Conn) -> None:
    async def body(client: AsyncClient) -> None:
        with pytest.raises(ValidationError):
            await client.enqueue("t", priority=-1)
        with pytest.raises(ValidationError):
            await client.enqueue("t", args={"x": {1, 2}})
        with pytest.raises(ValidationError, match=r"jobs\[1\]"):
            await client.enqueue_many([{"task": "t"}, {"task": "t", "dealy": 1}])

    run_with_client(dsn, body)
    assert count_jobs(conn) == 0


@pytest.mark.parametrize("keyed", [False, True])
def test_enqueue_many_returns_ids_in_input_order(dsn: str, conn: Conn, keyed: bool) -> None:
    rng = random.Random(11)
    n = 2_000
    items = [
        {
            "task": "t",
            "queue": rng.choice(["a", "b", "c"]),
            "priority": rng.randint(0, 1000),
            "args": {"i": i},
            **({"idempotency_key": f"k{i % 1500}"} if keyed else {}),
        }
        for i in range(n)
    ]

    async def body(client: AsyncClient) -> list[int]:
        assert await client.enqueue_many([]) == []
        return await client.enqueue_many(items)

    ids = run_with_client(dsn, body)
    assert len(ids) == n
    by_id = dict(conn.execute("SELECT id, (args->>'i')::int FROM queue_engine.jobs"))
    if keyed:
        # Items 1500.. repeat the keys of items 0..499: they resolve to those jobs.
        assert [by_id[i] for i in ids] == [i % 1500 for i in range(n)]
        assert count_jobs(conn) == 1500
    else:
        assert [by_id[i] for i in ids] == list(range(n))
        assert count_jobs(conn) == n


def test_get_cancel_retry_list(dsn: str, conn: Conn) -> None:
    conn.execute('LISTEN "queue_engine.cancel"')
    conn.execute('LISTEN "queue_engine.jobs"')

    async def body(client: AsyncClient) -> tuple[int, int]:
        queued = await client.enqueue("t.a", queue="q1", delay=600)
        running = await client.enqueue("t.b", queue="q2", delay=600)
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'w',"
            " started_at = now() WHERE id = %s",
            (running.id,),
        )
        assert (await client.get(queued.id)).id == queued.id
        with pytest.raises(JobNotFound):
            await client.get(987654)

        canceled = await client.cancel(queued.id)
        assert canceled.status is JobStatus.CANCELED
        assert canceled.finished_at is not None
        with pytest.raises(InvalidTransition):
            await client.cancel(queued.id)
        with pytest.raises(JobNotFound):
            await client.cancel(987654)

        requested = await client.cancel(running.id)
        assert requested.status is JobStatus.RUNNING
        assert requested.cancel_requested is True

        with pytest.raises(InvalidTransition, match="it is running"):
            await client.retry(running.id)
        retried = await client.retry(queued.id)
        assert (retried.status, retried.attempt, retried.finished_at) == (
            JobStatus.QUEUED,
            0,
            None,
        )
        with pytest.raises(InvalidTransition, match="it is queued"):
            await client.retry(queued.id)
        with pytest.raises(JobNotFound):
            await client.retry(987654)

        assert [j.id for j in await client.list()] == [running.id, queued.id]
        assert [j.id for j in await client.list(queue="q1")] == [queued.id]
        assert [j.id for j in await client.list(status="running")] == [running.id]
        assert [j.id for j in await client.list(task="t.b")] == [running.id]
        assert [j.id for j in await client.list(limit=1)] == [running.id]
        with pytest.raises(ValidationError):
            await client.list(status="nope")
        return queued.id, running.id

    queued_id, running_id = run_with_client(dsn, body)
    got = [(n.channel, n.payload) for n in conn.notifies(timeout=1.0, stop_after=2)]
    assert got == [("queue_engine.cancel", str(running_id)), ("queue_engine.jobs", "q1")]
    kinds = conn.execute("SELECT job_id, kind FROM queue_engine.job_events ORDER BY id").fetchall()
    assert kinds == [
        (queued_id, "canceled"),
        (running_id, "cancel_requested"),
        (queued_id, "retried"),
    ]


def test_retry_refused_while_the_dedupe_key_is_taken(dsn: str, conn: Conn) -> None:
    async def body(client: AsyncClient) -> None:
        first = await client.enqueue("t", dedupe_key="d")
        await client.cancel(first.id)
        await client.enqueue("t", dedupe_key="d")
        with pytest.raises(InvalidTransition, match="dedupe_key"):
            await client.retry(first.id)
        assert (await client.get(first.id)).status is JobStatus.CANCELED

    run_with_client(dsn, body)


def test_caller_async_connection_rollback_and_commit(dsn: str, conn: Conn) -> None:
    async def main() -> list[int]:
        async with await psycopg.AsyncConnection.connect(dsn) as tx:
            client = AsyncClient()
            await client.enqueue("t", conn=tx, idempotency_key="tx")
            await client.enqueue_many([{"task": "t"}, {"task": "t"}], conn=tx)
            assert count_jobs(conn) == 0
            await tx.rollback()
            assert count_jobs(conn) == 0

            bound = AsyncClient(conn=tx)
            job = await bound.enqueue("t", idempotency_key="tx")
            assert job.created is True  # the rolled-back job never held the key
            ids = await bound.enqueue_many([{"task": "t", "args": {"n": 1}}])
            assert (await bound.get(ids[0])).args == {"n": 1}
            assert count_jobs(conn) == 0
            await tx.commit()
            await bound.close()
            assert not tx.closed
            return [job.id, *ids]

    ids = asyncio.run(main())
    assert sorted(r[0] for r in conn.execute("SELECT id FROM queue_engine.jobs")) == sorted(ids)


def test_list_older_than(dsn: str, conn: Conn) -> None:
    async def body(client: AsyncClient) -> tuple[list[int], list[int], int, int]:
        old = (await client.enqueue("t.a", queue="q1")).id
        new = (await client.enqueue("t.a", queue="q1")).id
        conn.execute(
            "UPDATE queue_engine.jobs SET created_at = now() - interval '2 hours' WHERE id = %s",
            (old,),
        )
        with pytest.raises(ValidationError, match="older_than_s"):
            await client.list(older_than_s=-5)
        over_an_hour = [j.id for j in await client.list(older_than_s=3600)]
        every = [j.id for j in await client.list(older_than_s=None)]
        return over_an_hour, every, old, new

    over_an_hour, every, old, new = run_with_client(dsn, body)
    assert over_an_hour == [old]
    assert every == [new, old]
