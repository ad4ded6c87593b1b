"""Contract: the client's pool gives every connection back, whatever the call did.

``Client`` and ``AsyncClient`` take a pooled session with ``getconn`` and
return it with ``putconn`` (not ``pool.connection()``, to save the client's
instructions per single enqueue). A call that raises must still return its session, idle and
usable, so a one-connection pool keeps serving.
"""

from __future__ import annotations

import asyncio

import pytest

from queue_engine import AsyncClient, Client, JobNotFound
from queue_engine.errors import ValidationError


def test_a_one_connection_pool_keeps_serving_after_errors(dsn: str) -> None:
    with Client(dsn, pool_size=1) as client:
        first = client.enqueue("t", queue="q")
        for _ in range(3):
            with pytest.raises(JobNotFound):
                client.get(first.id + 1000)
        with pytest.raises(ValidationError):
            client.enqueue("bad task name")
        second = client.enqueue("t", queue="q")
        assert client.get(second.id).id == second.id
        pool = client._open_pool()
        stats = pool.get_stats()
        assert stats["pool_size"] == 1
        assert stats["pool_available"] == 1  # the session is back, not held


def test_a_session_left_in_a_transaction_is_rolled_back_on_return(dsn: str) -> None:
    with Client(dsn, pool_size=1) as client:
        with client._connection(None) as conn:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO queue_engine.jobs (task) VALUES ('left.open')")
        job = client.enqueue("t", queue="q")
        with client._connection(None) as conn:
            assert conn.info.transaction_status.name == "IDLE"
            left = conn.execute(
                "SELECT count(*) FROM queue_engine.jobs WHERE task = 'left.open'"
            ).fetchone()
        assert left == (0,)
        assert client.get(job.id).task == "t"


def test_the_async_client_returns_its_session_after_errors(dsn: str) -> None:
    async def main() -> tuple[int, int]:
        async with AsyncClient(dsn, pool_size=1) as client:
            first = await client.enqueue("t", queue="q")
            for _ in range(3):
                with pytest.raises(JobNotFound):
                    await client.get(first.id + 1000)
            second = await client.enqueue("t", queue="q")
            assert (await client.get(second.id)).id == second.id
            stats = (await client._open_pool()).get_stats()
            return stats["pool_size"], stats["pool_available"]

    assert asyncio.run(main()) == (1, 1)
