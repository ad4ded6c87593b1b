"""Invariant: at most one running job per lock key, and waiting jobs are not churned.

Three worker processes drain jobs spread over three lock keys (plus keyless
jobs); each handler records its start and end time. No two intervals of one
key may overlap, and every job succeeds on its first attempt: a job whose key
is busy is skipped by the claim, not run into a failure and retried.
"""

from __future__ import annotations

import itertools

import psycopg
from support.workers import (
    all_in,
    create_log_table,
    kill_all,
    spawn_worker,
    stop_process,
    wait_until,
)

from queue_engine import Client
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store


def test_no_two_jobs_of_one_key_overlap_across_three_workers(
    dsn: str, client: Client, conn
) -> None:
    create_log_table(dsn)
    jobs = [
        {"task": "record", "queue": "wt", "args": {"sleep": 0.02}, "lock_key": f"key-{i % 3}"}
        for i in range(36)
    ] + [{"task": "record", "queue": "wt", "args": {"sleep": 0.01}} for _ in range(6)]
    procs = []
    try:
        # One job at a time each: a prefetching worker would hold one job of every
        # key at once and leave the others nothing to take.
        procs = [spawn_worker(dsn) for _ in range(3)]

        def all_registered() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM queue_engine.workers WHERE role = 'worker' AND queue = 'wt'"
                " AND stopped_at IS NULL"
            ).fetchone()
            return row is not None and row[0] == 3

        # Enqueue only once every worker listens, so the exclusion is exercised across
        # processes rather than by whichever worker happened to start first.
        wait_until(all_registered, timeout=60, what="three workers registered")
        client.enqueue_many(jobs)
        wait_until(all_in(dsn, {"succeeded", "failed"}), timeout=90, what="all jobs finished")
        assert [stop_process(p) for p in procs] == [0, 0, 0]
    finally:
        kill_all(procs)
    rows = conn.execute("SELECT status, attempt, count(*) FROM queue_engine.jobs GROUP BY 1, 2")
    assert rows.fetchall() == [("succeeded", 1, len(jobs))]
    intervals = conn.execute(
        "SELECT lock_key, started, ended, pid FROM worker_test_log"
        " WHERE lock_key IS NOT NULL ORDER BY lock_key, started"
    ).fetchall()
    assert len(intervals) == 36
    assert len({r[3] for r in intervals}) >= 2, "expected several workers to take part"
    for (key1, _s1, end1, _p1), (key2, start2, _e2, _p2) in itertools.pairwise(intervals):
        if key1 == key2:
            assert end1 <= start2, f"two jobs of {key1} ran at the same time"


def test_claim_skips_a_job_whose_key_is_running(client: Client, conn) -> None:
    a = client.enqueue("t", queue="lk", lock_key="k").id
    b = client.enqueue("t", queue="lk", lock_key="k").id
    free = client.enqueue("t", queue="lk").id
    first = store.finish_and_claim(
        conn, "queue_engine", worker_id="w1", queue="lk", claim_limit=10
    ).claimed
    assert sorted(j.id for j in first) == [a, free]  # b waits: its key is running
    second = store.finish_and_claim(
        conn, "queue_engine", worker_id="w2", queue="lk", claim_limit=10
    ).claimed
    assert second == []
    job_a = next(j for j in first if j.id == a)
    finished = store.finish_only(
        conn, "queue_engine", worker_id="w1", queue="lk", outcomes=[oc.succeeded(job_a, None, 1)]
    )
    assert finished == {a: "succeeded"}
    third = store.finish_and_claim(
        conn, "queue_engine", worker_id="w2", queue="lk", claim_limit=10
    ).claimed
    assert [j.id for j in third] == [b]
    assert conn.execute("SELECT attempt FROM queue_engine.jobs WHERE id = %s", (b,)).fetchone() == (
        1,
    )


def test_advisory_lock_of_a_key_excludes_a_second_session(dsn: str, conn) -> None:
    with psycopg.connect(dsn, autocommit=True) as other:
        assert store.try_lock_key(conn, "queue_engine", "k1")
        assert not store.try_lock_key(other, "queue_engine", "k1")
        assert store.try_lock_key(other, "queue_engine", "k2")
        store.unlock_key(conn, "queue_engine", "k1")
        assert store.try_lock_key(other, "queue_engine", "k1")


def test_lost_lock_key_race_keeps_the_finish_and_retries_the_claim(
    dsn: str, client: Client, conn
) -> None:
    """Two workers pick two jobs of one idle key at once: the loser's finish still lands."""
    import threading

    from qe_worker_tasks import private_registry

    from queue_engine.worker import Worker, WorkerSettings

    plain = client.enqueue("t", queue="lk", priority=0).id
    first = client.enqueue("t", queue="lk", lock_key="K", priority=1).id
    second = client.enqueue("t", queue="lk", lock_key="K", priority=2).id
    loser = Worker(WorkerSettings(queue="lk", app="x", dsn=dsn), private_registry())
    with psycopg.connect(dsn, autocommit=True) as conn_b:
        # The loser holds `plain` (claimed and committed) and is about to finish it.
        (held,) = store.finish_and_claim(
            conn_b, "queue_engine", worker_id=loser.worker_id, queue="lk", claim_limit=1
        ).claimed
        assert held.id == plain
        with psycopg.connect(dsn) as conn_a:  # not autocommit: the winner's claim stays open
            (won,) = store.finish_and_claim(
                conn_a, "queue_engine", worker_id="winner", queue="lk", claim_limit=1
            ).claimed
            assert won.id == first
            result: list[int] = []
            errors: list[BaseException] = []

            def finish_and_claim() -> None:
                try:
                    claimed, _solo = loser.flusher._finish_and_claim(
                        conn_b, [oc.succeeded(held, "done", 1)], 1
                    )
                    result.append(claimed)
                except BaseException as exc:
                    errors.append(exc)

            thread = threading.Thread(target=finish_and_claim)
            thread.start()
            # The loser now waits on the unique index entry of the winner's claim of key K.
            wait_until(
                lambda: (
                    conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    ).fetchone()[0]
                    >= 1
                ),
                what="the loser blocked on the winner's claim",
            )
            conn_a.commit()
            thread.join(30)
    assert not errors, errors
    assert result == [0]  # the retried claim skips `second`: its key is running now
    rows = dict(conn.execute("SELECT id, status FROM queue_engine.jobs").fetchall())
    assert rows == {plain: "succeeded", first: "running", second: "queued"}
    assert conn.execute(
        "SELECT attempt FROM queue_engine.jobs WHERE id = %s", (second,)
    ).fetchone() == (0,)
