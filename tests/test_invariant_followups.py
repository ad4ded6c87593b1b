"""Invariant: a follow-up exists if and only if its parent's success exists.

A seeded random run of the worker's own finish statement: parents are claimed
by two workers and end in every way (success with 0-3 follow-ups, retry,
snooze, permanent failure), and some attempts are recovered under their
worker (a lease that ran out) so that worker's finish comes late and matches
nothing. Then: every follow-up names a parent that succeeded with the attempt
that buffered it, and every succeeded parent has exactly the follow-ups that
attempt buffered; a parent that did not succeed has none.
"""

from __future__ import annotations

import random
from typing import Any

import psycopg

from queue_engine import Client
from queue_engine.foundation import sql as queries
from queue_engine.producer.followups import FollowUpBuffer
from queue_engine.producer.retry import Permanent, Snooze
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Q = "inv"
OUT = "inv.out"
PARENTS = 40


def test_a_followup_exists_iff_its_parents_success_exists(
    client: Client, conn: psycopg.Connection[Any]
) -> None:
    rand = random.Random(11)
    ids = client.enqueue_many([{"task": "p", "queue": Q, "max_attempts": 4}] * PARENTS)
    buffered: dict[tuple[int, int], int] = {}  # (job id, attempt) -> follow-ups buffered
    late = 0  # outcomes the guarded finish did not apply (zombies)
    for _ in range(400):
        worker = rand.choice(["w1", "w2"])
        claimed = store.finish_and_claim(conn, S, worker_id=worker, queue=Q, claim_limit=3).claimed
        if not claimed and conn.execute(
            "SELECT count(*) = 0 FROM queue_engine.jobs WHERE queue = %s"
            " AND status IN ('queued', 'running')",
            (Q,),
        ).fetchone() == (True,):
            break
        outcomes = []
        for job in claimed:
            if rand.random() < 0.2:  # the lease runs out: the reaper takes the job back
                conn.execute(
                    "UPDATE queue_engine.jobs SET lease_expires_at = now() - interval '1 s'"
                    " WHERE id = %s",
                    (job.id,),
                )
                conn.execute(
                    queries.query("reap_expired", S),
                    {"now": None, "limit": 100, "jobs_channel": queries.jobs_channel(S)},
                )
            buffer = FollowUpBuffer(job.id, job.attempt)
            count = rand.randint(0, 3)
            buffer.add_many([{"task": "f", "queue": OUT, "args": {"n": n}} for n in range(count)])
            buffered[(job.id, job.attempt)] = count
            roll = rand.random()
            if roll < 0.5:
                outcome = oc.succeeded(job, None, 1, followups=buffer.encoded())
            elif roll < 0.7:
                outcome = oc.from_exception(job, RuntimeError("again"), 1, rand=lambda: 0.0)
            elif roll < 0.85:
                outcome = oc.from_exception(job, Snooze(0), 1)
            else:
                outcome = oc.from_exception(job, Permanent("never"), 1)
            outcomes.append(outcome)
        # A zombie's outcome goes with the others: the guarded finish must skip it alone.
        applied = store.finish_only(conn, S, worker_id=worker, queue=Q, outcomes=outcomes)
        late += len(outcomes) - len(applied)

    parents = {
        job_id: (status, attempt)
        for job_id, status, attempt in conn.execute(
            "SELECT id, status, attempt FROM queue_engine.jobs WHERE queue = %s", (Q,)
        ).fetchall()
    }
    assert set(parents) == set(ids)
    made: dict[tuple[int, int], int] = {}
    for message, count in conn.execute(
        "SELECT e.message, count(*) FROM queue_engine.job_events e"
        " JOIN queue_engine.jobs j ON j.id = e.job_id AND j.queue = %s"
        " WHERE e.kind = 'created' GROUP BY e.message",
        (OUT,),
    ).fetchall():
        parent, attempt = message.removeprefix("follow-up of job ").rstrip(")").split(" (attempt ")
        made[(int(parent), int(attempt))] = count
    total = conn.execute("SELECT count(*) FROM queue_engine.jobs WHERE queue = %s", (OUT,))
    assert sum(made.values()) == total.fetchone()[0]  # type: ignore[index]
    succeeded = {(job_id, a) for job_id, (status, a) in parents.items() if status == "succeeded"}
    # Only succeeded attempts made follow-ups...
    assert set(made) <= succeeded
    # ... and each one made exactly what it buffered.
    assert {key: made.get(key, 0) for key in succeeded} == {key: buffered[key] for key in succeeded}
    # The run covered the cases: successes, other ends, late (zombie) finishes.
    assert len(succeeded) > PARENTS // 3 and len(succeeded) < PARENTS and late > 0
