"""Invariant: a finish applies only to the attempt it claimed, and never raises otherwise.

Every finish is ``WHERE status = 'running' AND claimed_by = $me AND attempt = $n``;
a stale, duplicate or zombie finish matches nothing, returns nothing, and leaves
the row exactly as it was.
"""

from __future__ import annotations

import psycopg
import pytest

from queue_engine import Client
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Q = "inv"


def _row(conn: psycopg.Connection[tuple[object, ...]], job_id: int) -> tuple[object, ...]:
    row = conn.execute("SELECT * FROM queue_engine.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


def _claim(conn: psycopg.Connection[tuple[object, ...]], worker: str) -> store.FinishClaimResult:
    return store.finish_and_claim(conn, S, worker_id=worker, queue=Q, claim_limit=1)


@pytest.mark.parametrize(
    ("what", "attempt_delta", "worker"),
    [("wrong attempt", 1, "w1"), ("older attempt", -1, "w1"), ("other worker", 0, "w2")],
)
def test_stale_finish_matches_nothing_and_changes_nothing(
    client: Client, conn, what: str, attempt_delta: int, worker: str
) -> None:
    job_id = client.enqueue("t", queue=Q).id
    (job,) = _claim(conn, "w1").claimed
    before = _row(conn, job_id)
    events_before = conn.execute("SELECT count(*) FROM queue_engine.job_events").fetchone()
    stale = oc.succeeded(job, {"late": True}, 1)
    stale = oc.Outcome(**{**_fields(stale), "attempt": job.attempt + attempt_delta})
    finished = store.finish_only(conn, S, worker_id=worker, queue=Q, outcomes=[stale])
    assert finished == {}, what
    assert _row(conn, job_id) == before
    assert conn.execute("SELECT count(*) FROM queue_engine.job_events").fetchone() == events_before


def test_second_finish_of_the_same_attempt_is_a_no_op(client: Client, conn) -> None:
    job_id = client.enqueue("t", queue=Q).id
    (job,) = _claim(conn, "w1").claimed
    first = store.finish_only(
        conn, S, worker_id="w1", queue=Q, outcomes=[oc.succeeded(job, "first", 1)]
    )
    assert first == {job_id: "succeeded"}
    after_first = _row(conn, job_id)
    again = store.finish_only(
        conn,
        S,
        worker_id="w1",
        queue=Q,
        outcomes=[oc.from_exception(job, RuntimeError("zombie"), 1)],
    )
    assert again == {}
    assert _row(conn, job_id) == after_first


def test_finish_after_requeue_and_reclaim_cannot_touch_the_new_attempt(
    client: Client, conn
) -> None:
    job_id = client.enqueue("t", queue=Q).id
    (first,) = _claim(conn, "w1").claimed
    # The job goes back to the queue (as a reaper would do) and another worker claims it.
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'queued', available_at = now() WHERE id = %s",
        (job_id,),
    )
    (second,) = _claim(conn, "w2").claimed
    assert second.attempt == first.attempt + 1
    before = _row(conn, job_id)
    zombie = store.finish_only(
        conn, S, worker_id="w1", queue=Q, outcomes=[oc.succeeded(first, "zombie", 1)]
    )
    assert zombie == {}
    assert _row(conn, job_id) == before
    ok = store.finish_only(
        conn, S, worker_id="w2", queue=Q, outcomes=[oc.succeeded(second, "real", 1)]
    )
    assert ok == {job_id: "succeeded"}
    assert conn.execute(
        "SELECT result FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ).fetchone() == ("real",)


def test_batch_applies_only_the_matching_outcomes(client: Client, conn) -> None:
    ids = [client.enqueue("t", queue=Q).id for _ in range(3)]
    claimed = store.finish_and_claim(conn, S, worker_id="w1", queue=Q, claim_limit=3).claimed
    assert sorted(j.id for j in claimed) == ids
    good = [oc.succeeded(j, j.id, 1) for j in claimed[:2]]
    bad = oc.Outcome(**{**_fields(oc.succeeded(claimed[2], 0, 1)), "attempt": 99})
    finished = store.finish_only(conn, S, worker_id="w1", queue=Q, outcomes=[*good, bad])
    assert finished == {claimed[0].id: "succeeded", claimed[1].id: "succeeded"}
    assert conn.execute(
        "SELECT status FROM queue_engine.jobs WHERE id = %s", (claimed[2].id,)
    ).fetchone() == ("running",)


def _fields(outcome: oc.Outcome) -> dict[str, object]:
    return {name: getattr(outcome, name) for name in oc.Outcome.__slots__}  # type: ignore[attr-defined]
