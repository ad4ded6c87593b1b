"""Contract: the client's pool gives every connection back, whatever the call did.

``Client`` and ``AsyncClient`` take a pooled session through their
``KeptConnectionPool`` / ``KeptAsyncConnectionPool``, which keeps the session
just returned for the next call while no other call is in flight (not
``pool.connection()``, to save the client's instructions per single
enqueue). A call that raises must still return its session, idle and
usable, so a one-connection pool keeps serving; a kept session must never
starve a caller waiting on the pool.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from support.timing import FakeTiming

from queue_engine import AsyncClient, Client, JobNotFound
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.client_pool import HOLD_S, KeptAsyncConnectionPool, KeptConnectionPool


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
        pool.release()  # the session kept at hand, back in the pool
        stats = pool.pool.get_stats()
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
            pool = await client._open_pool()
            await pool.release()  # the session kept at hand, back in the pool
            stats = pool.pool.get_stats()
            return stats["pool_size"], stats["pool_available"]

    assert asyncio.run(main()) == (1, 1)


# --- the session kept at hand (queue_engine.producer.client_pool) ------------------------------


def kept_pool(dsn: str, size: int, clock: FakeTiming) -> KeptConnectionPool:
    pool = ConnectionPool(dsn, min_size=1, max_size=size, kwargs={"autocommit": True}, open=True)
    pool.wait()  # its first session ready: a take does not grow the pool meanwhile
    return KeptConnectionPool(pool, clock=clock)


def test_the_session_just_returned_is_the_next_one_taken(dsn: str) -> None:
    clock = FakeTiming(100.0)
    kept = kept_pool(dsn, 2, clock)
    try:
        first = kept.take(timeout=5)
        backend = first.info.backend_pid
        kept.give(first)
        for _ in range(5):
            conn = kept.take(timeout=5)
            assert conn is first
            assert conn.execute("SELECT pg_backend_pid()").fetchone() == (backend,)
            kept.give(conn)
        assert kept.pool.get_stats()["requests_num"] == 1  # the pool was asked once
    finally:
        kept.close()


def test_a_kept_session_goes_back_to_the_pool_after_hold_s(dsn: str) -> None:
    clock = FakeTiming(100.0)
    kept = kept_pool(dsn, 2, clock)
    try:
        kept.give(kept.take(timeout=5))
        clock.now += HOLD_S - 0.01
        kept.give(kept.take(timeout=5))
        assert kept.pool.get_stats()["requests_num"] == 1
        clock.now += 0.02  # HOLD_S since it left the pool
        kept.give(kept.take(timeout=5))
        assert kept.pool.get_stats()["requests_num"] == 2  # returned, and the pool asked again
        clock.now += HOLD_S - 0.01  # its new time out of the pool starts at that request
        kept.give(kept.take(timeout=5))
        assert kept.pool.get_stats()["requests_num"] == 2
    finally:
        kept.close()


def test_a_session_returned_while_another_call_is_in_flight_goes_to_the_pool(dsn: str) -> None:
    kept = kept_pool(dsn, 2, FakeTiming(100.0))
    try:
        first, second = kept.take(timeout=5), kept.take(timeout=5)
        kept.give(first)
        assert kept.pool.get_stats()["pool_available"] == 1  # first is back in the pool
        kept.give(second)
        assert kept.take(timeout=5) is second  # kept: nothing else was in flight
    finally:
        kept.close()


def test_one_session_serves_two_threads_in_turn(dsn: str) -> None:
    kept = kept_pool(dsn, 1, FakeTiming(100.0))
    calls = 200
    done: list[int] = []
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def caller() -> None:
        try:
            start.wait()
            for _ in range(calls):
                conn = kept.take(timeout=10)  # a starved thread fails here
                try:
                    conn.execute("SELECT 1")
                finally:
                    kept.give(conn)
            done.append(calls)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures
        assert done == [calls, calls]
    finally:
        kept.close()


def test_only_an_idle_open_session_is_kept(dsn: str) -> None:
    kept = kept_pool(dsn, 2, FakeTiming(100.0))
    try:
        in_transaction = kept.take(timeout=5)
        in_transaction.execute("BEGIN")
        available = kept.pool.get_stats()["pool_available"]
        kept.give(in_transaction)
        assert kept.pool.get_stats()["pool_available"] == available + 1  # rolled back there
        assert in_transaction.info.transaction_status.name == "IDLE"
        closed = kept.take(timeout=5)
        closed.close()
        kept.give(closed)
        fresh = kept.take(timeout=5)
        assert fresh is not closed and not fresh.closed
        assert fresh.execute("SELECT 1").fetchone() == (1,)
        kept.give(fresh)
    finally:
        kept.close()


def test_close_returns_the_kept_session_and_closes_the_pool(dsn: str) -> None:
    kept = kept_pool(dsn, 2, FakeTiming(100.0))
    conn = kept.take(timeout=5)
    kept.give(conn)
    kept.close()
    assert conn.closed
    assert kept.pool.closed


def test_a_client_enqueues_on_one_session_kept_between_calls(dsn: str) -> None:
    with Client(dsn) as client:
        backends = {
            client.enqueue("t", queue="q", args={"i": i}) and backend_of(client) for i in range(20)
        }
        assert len(backends) == 1
        # One backend alone would hold with the bare pool too (called from one
        # thread, it hands out the same session); the pool asked once per take
        # (40 here) would not. A slow machine may pass HOLD_S once or twice.
        assert client._open_pool().pool.get_stats()["requests_num"] < 5


def backend_of(client: Client) -> int:
    with client._connection(None) as conn:
        return int(conn.info.backend_pid)


def test_the_async_client_keeps_its_session_and_shares_it_between_tasks(dsn: str) -> None:
    """One session, tasks that overlap: each enqueue is served, none waits for the pool's timeout."""

    async def main() -> tuple[set[int], int, int, int]:
        async with AsyncClient(dsn, pool_size=1) as client:
            backends = set()
            for i in range(10):
                await client.enqueue("t", queue="q", args={"i": i})
                async with client._connection(None) as conn:
                    backends.add(conn.info.backend_pid)
            # The pool asked about once for those 20 takes, not 20 times.
            sequential = (await client._open_pool()).pool.get_stats()["requests_num"]
            jobs = await asyncio.wait_for(
                asyncio.gather(
                    *(client.enqueue("t", queue="q", args={"task": i}) for i in range(50))
                ),
                timeout=20,
            )
            pool = await client._open_pool()
            await pool.release()
            available = pool.pool.get_stats()["pool_available"]
            return backends, len({job.id for job in jobs}), available, sequential

    backends, distinct, available, sequential = asyncio.run(main())
    assert len(backends) == 1  # the same session, kept between calls
    assert sequential < 5
    assert distinct == 50
    assert available == 1


def test_a_kept_async_session_goes_back_to_the_pool_after_hold_s(dsn: str) -> None:
    async def main() -> list[int]:
        clock = FakeTiming(100.0)
        pool = AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False)
        await pool.open(wait=True)
        kept = KeptAsyncConnectionPool(pool, clock=clock)
        requests = []
        try:
            await kept.give(await kept.take(timeout=5))
            await kept.give(await kept.take(timeout=5))
            requests.append(pool.get_stats()["requests_num"])
            clock.now += HOLD_S
            await kept.give(await kept.take(timeout=5))
            requests.append(pool.get_stats()["requests_num"])
            first, second = await kept.take(timeout=5), await kept.take(timeout=5)
            await kept.give(first)  # another call in flight: to the pool
            requests.append(pool.get_stats()["pool_available"])
            await kept.give(second)
        finally:
            await kept.close()
        return requests

    assert asyncio.run(main()) == [1, 2, 1]
