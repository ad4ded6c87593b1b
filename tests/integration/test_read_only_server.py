"""A session on a server that refuses writes is dropped and opened again, never retried in a loop.

A standby, a primary still in recovery, or a primary fenced with
``default_transaction_read_only`` during a switchover answers every write with
SQLSTATE 25006 (``ReadOnlySqlTransaction``). Before, no daemon counted that as
a connection problem: the worker raised it out of its reconnect loop, and the
orchestrator's services kept the session and failed every run on it (the
leader kept "leading" on it), and a producer's pool handed the same session
out again on every retry. Now it is one of ``db.RECONNECT_ERRORS``, a session
whose server reports itself read-only is not used by a daemon, and a producer's
pooled session that hit it is replaced. Here the read-only
server is simulated on the test server by making one session, or one
database, read-only; ``tests/process/test_failover.py`` runs a real standby.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest
from support.timing import FakeTiming
from support.workers import wait_until, worker_session

from queue_engine import AsyncClient, Client
from queue_engine.daemon.service import Timing
from queue_engine.foundation.db import connect
from queue_engine.foundation.errors import DatabaseUnavailable
from queue_engine.orchestrator.leader import ElectionResult, LeaderElector
from queue_engine.orchestrator.reaper import Reaper
from queue_engine.worker.connection import WorkerConnection

Conn = psycopg.Connection[Any]


def make_read_only(conn: Conn) -> None:
    """Make this session's server look read-only to it (what a fenced primary does)."""
    conn.execute("SET default_transaction_read_only = on")


def worker_connection(dsn: str, fake: FakeTiming) -> WorkerConnection:
    return worker_session(dsn, worker_id="ro-test", queue="wt", timing=fake.timing)


def test_connect_for_writing_refuses_a_read_only_server_and_reading_does_not(
    dsn: str, conn: Conn
) -> None:
    dbname = conn.info.dbname
    conn.execute(f'ALTER DATABASE "{dbname}" SET default_transaction_read_only = on')
    with pytest.raises(DatabaseUnavailable, match="refuses writes"):
        connect(dsn, writable=True)
    with connect(dsn) as reader:  # queue-ctl's reads may use a standby
        assert reader.execute("SELECT 1").fetchone() == (1,)


def test_the_worker_drops_a_read_only_session_and_runs_on_a_new_one(
    dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeTiming()
    wc = worker_connection(dsn, fake)
    sessions: list[int] = []

    def write(c: Conn) -> int:
        sessions.append(c.info.backend_pid)
        if len(sessions) == 1:
            make_read_only(c)  # the server turns read-only under the worker
        row = c.execute(
            "UPDATE queue_engine.workers SET state = 'idle' WHERE id = 'ro-test' RETURNING 1"
        ).fetchone()
        return int(row[0]) if row else 0

    caplog.set_level(logging.INFO, logger="queue_engine.worker")
    try:
        assert wc.run(write, attempts=3) == 1
    finally:
        wc.drop()
    assert len(sessions) == 2 and sessions[0] != sessions[1], "not run again on a new session"
    assert len(fake.waits) == 1, "one backoff between the read-only session and the new one"
    assert any("worker.reconnected" in r.getMessage() for r in caplog.records)
    assert any(
        "worker.db_error" in r.getMessage() and "read-only" in r.getMessage()
        for r in caplog.records
    )


def test_a_sweep_on_a_server_turned_read_only_reconnects_instead_of_failing_every_run(
    dsn: str,
) -> None:
    reaper = Reaper(dsn, "queue_engine", stagger_s=0)
    try:
        reaper.run_once()
        first = reaper.db.get()
        first_pid = first.info.backend_pid
        make_read_only(first)
        reaper.run_once()  # before: ReadOnlySqlTransaction, on this run and every next one
        assert reaper.db.get().info.backend_pid != first_pid
        assert first.closed
    finally:
        reaper.on_stop()


def test_a_leader_on_a_server_turned_read_only_steps_down_and_competes_again(dsn: str) -> None:
    calls: list[str] = []
    elector = LeaderElector(
        dsn,
        "queue_engine",
        on_elected=lambda: calls.append("+"),
        on_demoted=lambda: calls.append("-"),
        timing=Timing(rand=lambda: 0.5),
    )
    try:
        assert elector.run_once().leader
        make_read_only(elector.db.get())
        # A lock held on a read-only server guards nothing the sweeps can write.
        after = elector.run_once()
        assert not after.leader and after.changed
        # The dropped session's lock is released when its backend exits, which the
        # server does on its own time after the close: under load the first try can
        # still find it held (a red CI run of stop 24). The elector wins at a later
        # try, as the orchestrator's next election tick would.
        results: list[ElectionResult] = []

        def competes() -> bool:
            results.append(elector.run_once())
            return results[-1].leader

        wait_until(competes, timeout=15, interval=0.05, what="the elector leads again")
        assert results[-1].changed and not any(r.changed for r in results[:-1])
        assert calls == ["+", "-", "+"]
    finally:
        elector.resign()


def test_a_producer_replaces_a_pooled_session_whose_server_turned_read_only(dsn: str) -> None:
    with Client(dsn, pool_size=1) as client:
        client.enqueue("t", queue="q")
        with client._connection(None) as pooled:
            make_read_only(pooled)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            client.enqueue("t", queue="q")  # the application sees it once, and retries
        assert client.enqueue("t", queue="q").id  # before: refused again, on every retry


def test_an_async_producer_replaces_a_pooled_session_whose_server_turned_read_only(
    dsn: str,
) -> None:
    async def scenario() -> None:
        async with AsyncClient(dsn, pool_size=1) as client:
            await client.enqueue("t", queue="q")
            async with client._connection(None) as pooled:
                await pooled.execute("SET default_transaction_read_only = on")
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await client.enqueue("t", queue="q")
            assert (await client.enqueue("t", queue="q")).id

    asyncio.run(scenario())
