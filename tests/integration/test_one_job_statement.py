"""The one-job forms of the worker's statement against its batch form, on a real Postgres.

A prefetch-1 worker sends ``onefinish`` and ``oneclaim`` on every job
(``store.size_tags``); a prefetching one, the batch form. The one-job claim
has no lock-key ranking, no count and no sort of its picks, so it must still
take the job the batch claim would take, report the same throttle, and take
nothing from a closed gate. A finish that gives a job back to run at once
wakes its queue's idle workers from the finish's own rows (no CTE of its
own), one notification per queue however many jobs it gives back.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from queue_engine import Client
from queue_engine.foundation import sql as queries
from queue_engine.foundation.sql import compiler
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Q = "one"


def _claim_rows(conn: psycopg.Connection[Any], tags: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """(is_claim, id) rows of one claim of at most one job with the statement ``tags``, rolled back."""
    statement = compiler.raw_statement("finish_and_claim_jobs", S, tags)
    params = store.statement_params(
        S,
        worker_id="w",
        queue=Q,
        outcomes=[],
        claim_limit=1,
        lease_ttl_s=60,
        gate=store.ClaimGate(host="h"),
    )
    with conn.transaction(force_rollback=True):
        rows = store.execute_raw(conn, statement, params).fetchall()
    return sorted(((row[0], row[1]) for row in rows), key=repr)


def _set_queue(conn: psycopg.Connection[Any], **columns: Any) -> None:
    names = ", ".join(columns)
    marks = ", ".join(["%s"] * len(columns))
    conn.execute(
        f"INSERT INTO {S}.queues (name, {names}) VALUES (%s, {marks})",  # type: ignore[arg-type]
        (Q, *columns.values()),
    )


def _scenario(name: str, client: Client, conn: psycopg.Connection[Any]) -> Any:
    """Fill the queue for ``name``; return the id the claim must take (None: nothing)."""
    if name == "empty":
        return None
    if name == "priority":
        client.enqueue("t", queue=Q, priority=5)
        best = client.enqueue("t", queue=Q, priority=1).id
        client.enqueue("t", queue=Q, priority=3)
        return best
    if name == "busy lock key":
        client.enqueue("t", queue=Q, priority=0, lock_key="k")
        (running,) = store.finish_and_claim(conn, S, worker_id="x", queue=Q, claim_limit=1).claimed
        assert running.lock_key == "k"
        client.enqueue("t", queue=Q, priority=0, lock_key="k")  # best, but its key is busy
        return client.enqueue("t", queue=Q, priority=1).id
    client.enqueue("t", queue=Q)
    if name == "paused":
        _set_queue(conn, paused=True, paused_at="now")
    else:  # "rate limited": one token per 1000 s, the burst spent a moment ago
        _set_queue(conn, rate_limit=0.001, rate_burst=1, rate_tokens=0.0, rate_refilled_at="now")
    return None


@pytest.mark.parametrize("name", ["empty", "priority", "busy lock key", "paused", "rate limited"])
def test_one_job_claim_takes_what_the_batch_claim_takes(
    client: Client, conn: psycopg.Connection[Any], name: str
) -> None:
    expected = _scenario(name, client, conn)
    batch = _claim_rows(conn, ("cold",))
    one = _claim_rows(conn, ("cold", "oneclaim"))
    assert one == batch
    claimed = [job_id for is_claim, job_id in one if is_claim]
    assert claimed == ([] if expected is None else [expected])
    # The rate limit withheld a due job: both say so with the row of no job.
    assert ((None, None) in one) == (name == "rate limited")


def _notifications(listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]) -> list[str]:
    """Payloads on the jobs channel up to a sentinel sent now (delivery is in commit order)."""
    conn.execute("SELECT pg_notify(%s, 'sentinel')", (queries.jobs_channel(S),))
    received = []
    for note in listener.notifies(timeout=30.0):
        if note.payload == "sentinel":
            return received
        received.append(note.payload)
    raise AssertionError("the sentinel notification never came")


@pytest.mark.parametrize("jobs", [1, 2], ids=["onefinish", "batch"])
def test_a_finish_giving_jobs_back_wakes_their_queue_once(
    dsn: str, client: Client, conn: psycopg.Connection[Any], jobs: int
) -> None:
    for _ in range(jobs * 3):
        client.enqueue("t", queue=Q)
    claimed = store.finish_and_claim(conn, S, worker_id="w", queue=Q, claim_limit=jobs * 3).claimed
    given_back, snoozed, done = claimed[:jobs], claimed[jobs : 2 * jobs], claimed[2 * jobs :]
    listener = psycopg.connect(dsn, autocommit=True)
    try:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(queries.jobs_channel(S))))

        def finish(outcomes: list[oc.Outcome]) -> dict[int, str]:
            return store.finish_only(conn, S, worker_id="w", queue=Q, outcomes=outcomes)

        later = [
            oc.Outcome(j.id, j.attempt, "queued", "snoozed", delay_s=60, refund=1) for j in snoozed
        ]
        assert set(finish(later).values()) == {"queued"}
        assert set(finish([oc.succeeded(j, None, 1) for j in done]).values()) == {"succeeded"}
        assert _notifications(listener, conn) == []  # run later, or ended: nobody to wake
        assert set(finish([oc.released(j) for j in given_back]).values()) == {"queued"}
        assert _notifications(listener, conn) == [Q]
    finally:
        listener.close()
