"""Kept cursors (``db.CursorKeepingConnection``): the worker's session and a client's pool.

A new cursor per statement built its adapters and a loader per result column
every time: 67,600 of the worker's 506,700 main-thread instructions per job,
and about 18 us of a producer's CPU per single enqueue (bench/runs/2026-11-27-log.md, "A
kept cursor for the worker's statements"). These tests check that a kept
cursor answers the worker's different statements, one after another, as
fresh cursors do; that a closed one is replaced; that the worker's own
session is such a connection; and that a client's single enqueue runs on its
pooled connection's kept cursor and answers the job it made.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from support.workers import worker_session

from queue_engine import AsyncClient, Client, Job
from queue_engine.foundation.db import (
    AsyncCursorKeepingConnection,
    CursorKeepingConnection,
    connect,
)
from queue_engine.producer.context import ClaimedJob
from queue_engine.worker import store
from queue_engine.worker.outcomes import succeeded
from queue_engine.worker.store import ClaimGate

S = "queue_engine"
Q = "kq"
GATE = ClaimGate(host="h")


def register(conn: psycopg.Connection[Any], worker_id: str) -> None:
    store.register(conn, S, worker_id=worker_id, queue=Q, host="h", pid=1, state="idle")


def run_two_jobs(conn: psycopg.Connection[Any], worker_id: str) -> list[tuple[Any, ...]]:
    """Claim a job, beat, finish it while claiming the next, beat: what each step answered."""

    def beat(job: ClaimedJob) -> store.BeatReply:
        return store.heartbeat(
            conn,
            S,
            worker_id=worker_id,
            state="busy",
            current_job_id=job.id,
            held=[(job.id, job.attempt, None)],
            lease_ttl_s=60,
        )

    register(conn, worker_id)
    first = store.finish_and_claim(conn, S, worker_id=worker_id, queue=Q, claim_limit=1, gate=GATE)
    [job] = first.claimed
    after_claim = beat(job)
    second = store.finish_and_claim(
        conn,
        S,
        worker_id=worker_id,
        queue=Q,
        outcomes=[succeeded(job, {"n": job.args["n"]}, 1)],
        claim_limit=1,
        gate=GATE,
    )
    [nxt] = second.claimed
    last_beat = beat(nxt)
    return [
        (job.task, job.args, job.attempt, job.queue),
        (after_claim.registered, after_claim.lost_ids, after_claim.cancel_ids),
        (list(second.finished.values()), nxt.args, nxt.attempt),
        (last_beat.registered, last_beat.lost_ids),
    ]


def test_the_raw_cursor_is_kept_and_a_closed_one_replaced(dsn: str) -> None:
    with connect(dsn, connection_class=CursorKeepingConnection) as conn:
        assert isinstance(conn, CursorKeepingConnection)
        kept = conn.raw_cursor()
        assert conn.raw_cursor() is kept
        kept.close()
        fresh = conn.raw_cursor()
        assert fresh is not kept
        assert not fresh.closed
        assert conn.raw_cursor() is fresh


def test_a_kept_cursor_answers_the_worker_statements_as_fresh_cursors_do(
    dsn: str, client: Client
) -> None:
    for n in range(4):
        client.enqueue("kept.job", queue=Q, args={"n": n})
    with (
        connect(dsn, connection_class=CursorKeepingConnection) as kept,
        connect(dsn) as plain,
    ):
        assert not isinstance(plain, CursorKeepingConnection)
        cursor = kept.raw_cursor()
        on_kept = run_two_jobs(kept, "w-kept")
        assert kept.raw_cursor() is cursor  # one cursor served every statement
        on_plain = run_two_jobs(plain, "w-plain")
    assert on_kept[0] == ("kept.job", {"n": 0}, 1, Q)
    assert on_plain[0] == ("kept.job", {"n": 2}, 1, Q)
    assert on_kept[1] == on_plain[1] == (True, frozenset(), frozenset())
    assert on_kept[2] == (["succeeded"], {"n": 1}, 1)
    assert on_plain[2] == (["succeeded"], {"n": 3}, 1)
    assert on_kept[3] == on_plain[3] == (True, frozenset())
    rows = client.list(queue=Q)
    assert sorted((job.args["n"], job.status.value, job.claimed_by) for job in rows) == [
        (0, "succeeded", "w-kept"),
        (1, "running", "w-kept"),
        (2, "succeeded", "w-plain"),
        (3, "running", "w-plain"),
    ]


def test_the_worker_session_is_a_cursor_keeping_connection(dsn: str) -> None:
    session = worker_session(dsn, worker_id="w-session", queue=Q)
    try:
        assert session.run(lambda conn: isinstance(conn, CursorKeepingConnection))
    finally:
        session.drop()


def test_a_client_enqueues_on_the_kept_cursor_of_its_pooled_connection(dsn: str) -> None:
    with Client(dsn, pool_size=1) as client:  # one pooled connection: the one we look at
        first = client.enqueue("kept.enqueue", queue=Q, args={"n": 0})
        with client._connection(None) as conn:
            assert isinstance(conn, CursorKeepingConnection)
            kept = conn.tuple_cursor()
            kept.execute("SELECT 1")
        second = client.enqueue("kept.enqueue", queue=Q, args={"n": 1}, priority=7)
        assert kept.statusmessage == "INSERT 0 1"  # the enqueue ran on the kept cursor
        third = client.enqueue("kept.enqueue", queue=Q, args={"n": 2})
        assert first.id < second.id < third.id
        for job in (first, second, third):
            stored = client.get(job.id)
            assert (stored.args, stored.priority, stored.available_at, stored.created_at) == (
                job.args,
                job.priority,
                job.available_at,
                job.created_at,
            )
        assert (second.args, second.priority, second.queue) == ({"n": 1}, 7, Q)


def test_an_async_client_enqueues_on_the_kept_cursor_of_its_pooled_connection(dsn: str) -> None:
    async def scenario() -> tuple[list[Job], list[Job], str | None]:
        async with AsyncClient(dsn, pool_size=1) as client:
            first = await client.enqueue("kept.async", queue=Q, args={"n": 0})
            async with client._connection(None) as conn:
                assert isinstance(conn, AsyncCursorKeepingConnection)
                kept = conn.tuple_cursor()
                await kept.execute("SELECT 1")
            second = await client.enqueue("kept.async", queue=Q, args={"n": 1}, priority=7)
            status = kept.statusmessage  # the enqueue ran on the kept cursor
            third = await client.enqueue("kept.async", queue=Q, args={"n": 2})
            made = [first, second, third]
            stored = [await client.get(job.id) for job in made]
            return made, stored, status

    made, stored, status = asyncio.run(scenario())
    assert status == "INSERT 0 1"
    assert made[0].id < made[1].id < made[2].id
    for job, row in zip(made, stored, strict=True):
        assert (row.args, row.priority, row.available_at, row.created_at) == (
            job.args,
            job.priority,
            job.available_at,
            job.created_at,
        )
    assert (made[1].args, made[1].priority, made[1].queue) == ({"n": 1}, 7, Q)
