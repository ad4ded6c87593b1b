"""The claim statement's gate, one control at a time, against a real Postgres.

Every operator control is enforced by ``finish_and_claim_jobs.sql`` itself, so
a worker that has not yet seen a control's NOTIFY still cannot break it. These
tests call the worker's statement directly (``store.finish_and_claim``) with
each gate input; the worker's own reaction (state, slots, stop) is tested in
``test_worker_controls.py`` and the cluster-wide limits in
``tests/test_invariant_scale_limit.py`` and ``test_invariant_rate_limit.py``.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from queue_engine import Client
from queue_engine.worker import store
from queue_engine.worker.store import ClaimGate

S = "queue_engine"
Q = "gq"


def claim(conn: psycopg.Connection[Any], gate: ClaimGate, limit: int = 1, **kw: Any) -> Any:
    return store.finish_and_claim(
        conn, S, worker_id=kw.pop("worker_id", "w1"), queue=Q, claim_limit=limit, gate=gate, **kw
    )


def ids(result: store.FinishClaimResult) -> list[int]:
    return [job.id for job in result.claimed]


def set_control(conn: psycopg.Connection[Any], **columns: Any) -> None:
    names = ", ".join(columns)
    values = ", ".join(f"%({n})s" for n in columns)
    updates = ", ".join(f"{n} = excluded.{n}" for n in columns)
    conn.execute(
        f"INSERT INTO {S}.queues (name, {names}) VALUES (%(queue)s, {values})"  # type: ignore[arg-type]
        f" ON CONFLICT (name) DO UPDATE SET {updates}",
        {"queue": Q, **columns},
    )


def register(conn: psycopg.Connection[Any], worker_id: str, host: str) -> None:
    conn.execute(
        f"INSERT INTO {S}.workers (id, queue, host, pid) VALUES (%s, %s, %s, 1)",
        (worker_id, Q, host),
    )


def test_scale_limit_admits_only_slots_below_it(client: Client, conn) -> None:
    job_ids = [client.enqueue("t", queue=Q).id for _ in range(4)]
    set_control(conn, scale_limit=2)
    # No slot held: no claim while a limit exists.
    assert ids(claim(conn, ClaimGate(host="h", slot=None))) == []
    assert ids(claim(conn, ClaimGate(host="h", slot=2))) == []
    assert ids(claim(conn, ClaimGate(host="h", slot=1))) == job_ids[:1]
    assert ids(claim(conn, ClaimGate(host="h", slot=0), worker_id="w2")) == job_ids[1:2]
    set_control(conn, scale_limit=0)
    assert ids(claim(conn, ClaimGate(host="h", slot=0))) == []
    set_control(conn, scale_limit=None)
    assert ids(claim(conn, ClaimGate(host="h", slot=None))) == job_ids[2:3]


def test_scale_slots_are_exclusive_and_free_with_the_session(dsn: str) -> None:
    with (
        psycopg.connect(dsn, autocommit=True) as a,
        psycopg.connect(dsn, autocommit=True) as b,
        psycopg.connect(dsn, autocommit=True) as c,
    ):
        assert store.take_scale_slot(a, S, queue=Q, limit=2) == 0
        assert store.take_scale_slot(b, S, queue=Q, limit=2) == 1
        assert store.take_scale_slot(c, S, queue=Q, limit=2) is None  # both slots held
        # Another queue's slots are a lock space of their own.
        assert store.take_scale_slot(c, S, queue="other", limit=1) == 0
        held = c.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
            " AND pid = pg_backend_pid()"
        ).fetchone()
        assert held == (1,)  # LIMIT 1 stopped at the first slot taken: no extra lock
        store.release_scale_slot(a, S, queue=Q, slot=0)
        assert store.take_scale_slot(c, S, queue=Q, limit=2) == 0
        b.close()  # b's session ends: its slot frees itself
        with psycopg.connect(dsn, autocommit=True) as d:
            assert store.take_scale_slot(d, S, queue=Q, limit=2) == 1
            assert store.take_scale_slot(d, S, queue=Q, limit=0) is None


def test_parks_gate_by_worker_by_host_and_queue(client: Client, conn) -> None:
    job_ids = [client.enqueue("t", queue=Q).id for _ in range(3)]
    register(conn, "w1", "h1")
    register(conn, "w2", "h2")
    conn.execute(f"INSERT INTO {S}.worker_parks (worker_id) VALUES ('w1')")
    assert ids(claim(conn, ClaimGate(host="h1"), worker_id="w1")) == []
    conn.execute(f"INSERT INTO {S}.worker_parks (host, queue) VALUES ('h2', 'other')")
    # A park of another queue on h2 does not touch gq.
    assert ids(claim(conn, ClaimGate(host="h2"), worker_id="w2")) == job_ids[:1]
    conn.execute(f"INSERT INTO {S}.worker_parks (host) VALUES ('h2')")  # every queue of h2
    assert ids(claim(conn, ClaimGate(host="h2"), worker_id="w2")) == []
    conn.execute(f"DELETE FROM {S}.worker_parks WHERE worker_id = 'w1'")
    assert ids(claim(conn, ClaimGate(host="h1"), worker_id="w1")) == job_ids[1:2]
    # A parked worker still finishes what it runs.
    conn.execute(f"INSERT INTO {S}.worker_parks (host, queue) VALUES ('h1', %s)", (Q,))
    from queue_engine.worker import outcomes as oc

    job = client.get(job_ids[1])
    assert job is not None and job.status == "running"
    done = store.finish_and_claim(
        conn,
        S,
        worker_id="w1",
        queue=Q,
        outcomes=[oc.Outcome(job.id, job.attempt, "succeeded", "succeeded", duration_ms=1)],
        claim_limit=1,
        gate=ClaimGate(host="h1"),
    )
    assert done.finished == {job.id: "succeeded"} and done.claimed == []


def test_rate_limit_grants_tokens_and_reports_the_throttle(client: Client, conn) -> None:
    for _ in range(5):
        client.enqueue("t", queue=Q)
    set_control(conn, rate_limit=0.001, rate_burst=2)  # one token per 1000 s: only the burst
    first = claim(conn, ClaimGate(host="h"), limit=5)
    assert len(first.claimed) == 2 and first.throttled
    second = claim(conn, ClaimGate(host="h"), limit=1)
    assert second.claimed == [] and second.throttled
    tokens = conn.execute(f"SELECT rate_tokens FROM {S}.queues WHERE name = %s", (Q,)).fetchone()
    assert tokens is not None and 0 <= tokens[0] < 1
    set_control(conn, rate_limit=None)
    free = claim(conn, ClaimGate(host="h"), limit=5)
    assert len(free.claimed) == 3 and not free.throttled


def test_rate_limit_spends_nothing_when_nothing_is_claimed(client: Client, conn) -> None:
    set_control(conn, rate_limit=0.001, rate_burst=1)
    empty = claim(conn, ClaimGate(host="h"), limit=3)
    assert empty.claimed == [] and not empty.throttled  # nothing due: not throttled either
    job_id = client.enqueue("t", queue=Q).id
    assert ids(claim(conn, ClaimGate(host="h"), limit=3)) == [job_id]  # the token was kept


def test_warm_key_prefers_its_jobs_within_the_best_priority(client: Client, conn) -> None:
    cold = client.enqueue("t", queue=Q).id
    warm = client.enqueue("t", queue=Q, affinity_key="model-a").id
    other = client.enqueue("t", queue=Q, affinity_key="model-b").id
    gate = ClaimGate(host="h", warm_key="model-a", affinity_wait_s=60)
    assert ids(claim(conn, gate)) == [warm]
    # Nothing warm left: the normal order.
    assert ids(claim(conn, gate)) == [cold]
    assert ids(claim(conn, gate)) == [other]


def test_warm_preference_never_beats_a_better_priority(client: Client, conn) -> None:
    urgent = client.enqueue("t", queue=Q, priority=10).id
    warm = client.enqueue("t", queue=Q, affinity_key="m", priority=100).id
    gate = ClaimGate(host="h", warm_key="m", affinity_wait_s=60)
    assert ids(claim(conn, gate)) == [urgent]
    assert ids(claim(conn, gate)) == [warm]


def test_warm_preference_stops_once_the_head_waited_too_long(client: Client, conn) -> None:
    old = client.enqueue("t", queue=Q).id
    warm = client.enqueue("t", queue=Q, affinity_key="m").id
    conn.execute(
        f"UPDATE {S}.jobs SET available_at = now() - interval '30 seconds' WHERE id = %s", (old,)
    )
    # The head (old) has waited 30 s, longer than the 10 s allowed: no preference.
    assert ids(claim(conn, ClaimGate(host="h", warm_key="m", affinity_wait_s=10))) == [old]
    assert ids(claim(conn, ClaimGate(host="h", warm_key="m", affinity_wait_s=10))) == [warm]


def test_warm_batch_puts_the_warm_job_first_without_duplicates(client: Client, conn) -> None:
    a = client.enqueue("t", queue=Q).id
    b = client.enqueue("t", queue=Q).id
    w = client.enqueue("t", queue=Q, affinity_key="m").id
    got = ids(claim(conn, ClaimGate(host="h", warm_key="m", affinity_wait_s=60), limit=5))
    assert got == [w, a, b]


def test_warm_job_with_a_busy_lock_key_is_not_preferred(client: Client, conn) -> None:
    busy = client.enqueue("t", queue=Q, lock_key="k").id
    assert ids(claim(conn, ClaimGate(host="h"))) == [busy]
    cold = client.enqueue("t", queue=Q).id
    client.enqueue("t", queue=Q, affinity_key="m", lock_key="k")
    assert ids(claim(conn, ClaimGate(host="h", warm_key="m", affinity_wait_s=60))) == [cold]


@pytest.mark.parametrize("limit", [0, 1])
def test_claim_returns_the_affinity_key(client: Client, conn, limit: int) -> None:
    job_id = client.enqueue("t", queue=Q, affinity_key="m").id
    got = claim(conn, ClaimGate(host="h"), limit=limit).claimed
    assert [(j.id, j.affinity_key) for j in got] == ([(job_id, "m")] if limit else [])
