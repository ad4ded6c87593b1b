"""Invariant: idempotency and dedupe keys are race-free under concurrent producers.

Whatever the interleaving of producers enqueuing the same key at the same
moment (each on its own connection, started together by a barrier), exactly
one job row exists per key and every call returns that job's id; exactly one
call reports ``created``. The same holds for ``enqueue_many`` batches whose
keys overlap, and for dedupe keys while the active job keeps being canceled
(at most one active job per dedupe key, every enqueue answered).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg

from queue_engine import Client, Job

Conn = psycopg.Connection[Any]
T = TypeVar("T")

THREADS = 8
CALLS = 20


def run_together(n: int, work: Callable[[int], T]) -> list[T]:
    """Run ``work(i)`` in ``n`` threads released at the same instant; re-raise any error."""
    barrier = threading.Barrier(n)

    def start(i: int) -> T:
        barrier.wait(timeout=30)
        return work(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(start, i) for i in range(n)]
        return [f.result(timeout=120) for f in futures]


def connections(dsn: str, n: int) -> list[Conn]:
    return [psycopg.connect(dsn, autocommit=True) for _ in range(n)]


def test_concurrent_idempotency_key_makes_one_job(dsn: str, conn: Conn) -> None:
    clients = [Client(dsn, pool_size=1) for _ in range(THREADS)]
    for c in clients:  # open the pools before the race
        c.list(limit=1)

    def work(i: int) -> list[Job]:
        return [
            clients[i].enqueue("t", args={"thread": i, "call": n}, idempotency_key="the-key")
            for n in range(CALLS)
        ]

    try:
        results = [job for jobs in run_together(THREADS, work) for job in jobs]
    finally:
        for c in clients:
            c.close()
    rows = conn.execute("SELECT id, args FROM queue_engine.jobs").fetchall()
    assert len(rows) == 1
    [(job_id, args)] = rows
    assert len(results) == THREADS * CALLS
    assert {j.id for j in results} == {job_id}
    assert sum(j.created for j in results) == 1
    [winner] = [j for j in results if j.created]
    assert winner.args == args
    assert all(j.args == args for j in results)


def test_concurrent_dedupe_key_makes_one_active_job(dsn: str, conn: Conn) -> None:
    conns = connections(dsn, THREADS)

    def work(i: int) -> list[Job]:
        client = Client(conn=conns[i])
        return [client.enqueue("t", dedupe_key="the-key") for _ in range(CALLS)]

    try:
        results = [job for jobs in run_together(THREADS, work) for job in jobs]
    finally:
        for c in conns:
            c.close()
    ids = [r[0] for r in conn.execute("SELECT id FROM queue_engine.jobs")]
    assert len(ids) == 1
    assert {j.id for j in results} == set(ids)
    assert sum(j.created for j in results) == 1


def test_concurrent_distinct_keys_each_make_one_job(dsn: str, conn: Conn) -> None:
    """Many keys raced at once: one job per key, and every caller agrees on it."""
    conns = connections(dsn, THREADS)
    keys = [f"k{n}" for n in range(CALLS)]

    def work(i: int) -> dict[str, int]:
        client = Client(conn=conns[i])
        order = keys if i % 2 == 0 else list(reversed(keys))
        out = {}
        for key in order:
            out[key] = client.enqueue("t", idempotency_key=key, dedupe_key=f"d-{key}").id
        return out

    try:
        per_thread = run_together(THREADS, work)
    finally:
        for c in conns:
            c.close()
    stored = dict(conn.execute("SELECT idempotency_key, id FROM queue_engine.jobs").fetchall())
    assert len(stored) == len(keys)
    for seen in per_thread:
        assert seen == stored


def test_concurrent_enqueue_many_with_overlapping_keys(dsn: str, conn: Conn) -> None:
    """Each batch shares keys with the others; ids agree, one row per key."""
    conns = connections(dsn, THREADS)
    shared = 200

    def work(i: int) -> list[tuple[str, int]]:
        client = Client(conn=conns[i])
        # Overlapping windows of the shared keys, in one global order, plus keys
        # of this thread only and keyless items, interleaved.
        start = i * 10
        items: list[dict[str, Any]] = []
        for n in range(start, start + shared - 60):
            items.append({"task": "t", "idempotency_key": f"shared-{n}", "args": {"t": i}})
            if n % 7 == 0:
                items.append({"task": "t", "idempotency_key": f"own-{i}-{n}"})
            if n % 11 == 0:
                items.append({"task": "t"})
        ids = client.enqueue_many(items)
        return [
            (item.get("idempotency_key", ""), job_id)
            for item, job_id in zip(items, ids, strict=True)
        ]

    try:
        per_thread = run_together(THREADS, work)
    finally:
        for c in conns:
            c.close()
    stored = dict(
        conn.execute(
            "SELECT idempotency_key, id FROM queue_engine.jobs WHERE idempotency_key IS NOT NULL"
        ).fetchall()
    )
    keyless = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE idempotency_key IS NULL"
    ).fetchone()[0]
    expected_keys = set()
    expected_keyless = 0
    for pairs in per_thread:
        for key, job_id in pairs:
            if key:
                expected_keys.add(key)
                assert stored[key] == job_id, key
            else:
                expected_keyless += 1
                assert job_id not in stored.values()
    assert set(stored) == expected_keys
    assert keyless == expected_keyless


def test_dedupe_race_with_cancels_keeps_one_active_job(dsn: str, conn: Conn) -> None:
    """Producers race on a dedupe key while a canceler keeps finishing the active job."""
    conns = connections(dsn, THREADS)
    done = threading.Event()

    def canceler() -> int:
        client = Client(conn=conns[0])
        canceled = 0
        while not done.is_set():
            for job in client.list(status="queued", limit=5):
                client.cancel(job.id)  # only this thread changes statuses: cannot be refused
                canceled += 1
        return canceled

    def producer(i: int) -> list[Job]:
        client = Client(conn=conns[i])
        return [client.enqueue("t", dedupe_key="hot") for _ in range(CALLS)]

    def work(i: int) -> Any:
        return canceler() if i == 0 else producer(i)

    try:
        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            barrier = threading.Barrier(THREADS)

            def start(i: int) -> Any:
                barrier.wait(timeout=30)
                return work(i)

            futures = [pool.submit(start, i) for i in range(THREADS)]
            results = [f.result(timeout=120) for f in futures[1:]]
            done.set()
            assert futures[0].result(timeout=30) >= 1  # the race really happened
    finally:
        done.set()
        for c in conns:
            c.close()
    jobs = [j for batch in results for j in batch]
    assert len(jobs) == (THREADS - 1) * CALLS
    assert all(j.dedupe_key == "hot" for j in jobs)
    active = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE dedupe_key = 'hot'"
        " AND status IN ('queued', 'running')"
    ).fetchone()[0]
    assert active <= 1
    total = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0]
    # Every created job is a row, and every row was created by exactly one call.
    assert sum(j.created for j in jobs) == total
    assert {j.id for j in jobs if j.created} == {
        r[0] for r in conn.execute("SELECT id FROM queue_engine.jobs")
    }


def test_concurrent_enqueue_many_with_overlapping_keys_in_any_order(dsn: str, conn: Conn) -> None:
    conns = connections(dsn, 4)
    keys = [f"k{n}" for n in range(3000)]

    def work(i: int) -> list[int]:
        order = list(keys)
        random.Random(i).shuffle(order)
        ids = Client(conn=conns[i]).enqueue_many(
            [{"task": "t", "idempotency_key": k} for k in order]
        )
        by_key = dict(zip(order, ids, strict=True))
        return [by_key[k] for k in keys]

    try:
        for _ in range(3):
            conn.execute("DELETE FROM queue_engine.jobs")
            per_thread = run_together(4, work)
            stored = dict(conn.execute("SELECT idempotency_key, id FROM queue_engine.jobs"))
            assert len(stored) == len(keys)
            for ids in per_thread:
                assert ids == [stored[k] for k in keys]
    finally:
        for c in conns:
            c.close()
