"""The testing kit for asyncio code: the async assertions, ``async_client``, drain of an AsyncClient.

Run by anyio's pytest plugin (``@pytest.mark.anyio``), which gives the
``async_client`` fixture (tests/conftest.py, the plugin's ``qe_async_client``)
the test's own event loop.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from queue_engine import AsyncClient, Client
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import (
    assert_enqueued,
    assert_enqueued_async,
    drain,
    enqueued_jobs_async,
    refute_enqueued,
    refute_enqueued_async,
)

pytestmark = pytest.mark.anyio

Q = "kit-async"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_async_assertions_see_the_open_transaction_and_its_rollback(
    dsn: str, async_client: AsyncClient
) -> None:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.transaction(force_rollback=True):
            bound = AsyncClient(conn=conn)
            job = await bound.enqueue("email.send", queue=Q, args={"to": "a@x", "lang": "en"})
            found = await assert_enqueued_async(conn, task="email.send", args={"to": "a@x"})
            assert found.id == job.id
            assert (await assert_enqueued_async(bound, task="email.send")).id == job.id
            # Another session (the fixture's pool) does not see it before a commit.
            await refute_enqueued_async(async_client, task="email.send")
        await refute_enqueued_async(conn, task="email.send")


async def test_async_assertion_failures_list_what_was_enqueued(async_client: AsyncClient) -> None:
    await async_client.enqueue("email.send", queue=Q, args={"to": "a@x"})
    with pytest.raises(AssertionError) as failure:
        await assert_enqueued_async(async_client, task="email.sned")
    assert "no job enqueued with task='email.sned'" in str(failure.value)
    assert "task='email.send' queue='kit-async' args={'to': 'a@x'} status=queued" in str(
        failure.value
    )
    with pytest.raises(AssertionError, match=r"expected no job enqueued .* found 1"):
        await refute_enqueued_async(async_client, queue=Q)
    assert [j.args for j in await enqueued_jobs_async(async_client, queue=Q)] == [{"to": "a@x"}]


async def test_async_assertions_take_a_dsn_as_the_sync_ones_do(
    dsn: str, async_client: AsyncClient
) -> None:
    job = await async_client.enqueue("email.send", queue=Q, args={"to": "d@x"})
    assert (await assert_enqueued_async(dsn, task="email.send", args={"to": "d@x"})).id == job.id
    await refute_enqueued_async(dsn, task="email.sned")
    assert [j.id for j in await enqueued_jobs_async(dsn, queue=Q)] == [job.id]


async def test_drain_takes_an_async_client(async_client: AsyncClient) -> None:
    tasks = TaskRegistry()
    tasks.register(TaskDefinition("double", lambda args: args["n"] * 2, queue=Q))
    job = await async_client.enqueue("double", queue=Q, args={"n": 21})
    [outcome] = drain(async_client, queue=Q, tasks=tasks)
    assert (outcome.job_id, outcome.status, outcome.result) == (job.id, "succeeded", 42)
    assert (await async_client.get(job.id)).status == "succeeded"


def test_sync_assertions_take_a_connection(dsn: str, client: Client) -> None:
    """A plain psycopg connection in an open transaction is a target too (no anyio needed)."""
    with psycopg.connect(dsn) as conn:
        Client(conn=conn).enqueue("email.send", queue=Q, args={"to": "b@x"})
        job: Any = assert_enqueued(conn, task="email.send", args={"to": "b@x"})
        assert job.queue == Q
        refute_enqueued(client, task="email.send")
        conn.rollback()
        refute_enqueued(conn, task="email.send")
