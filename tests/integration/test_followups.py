"""Atomic follow-ups (``ctx.enqueue``) against a real Postgres and a real worker loop.

The follow-ups a handler buffers are inserted by the worker's finish statement
only for an outcome it applied as ``succeeded``: every option as the client
sets it, keys conflicting skipped, nothing for a failure, retry, snooze, cancel
or a zombie finish, and bad options refused in the handler.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import followups_app
import psycopg
import pytest
from followups_app import OUT, QUEUE
from support.workers import running_worker, wait_until

from queue_engine import Client
from queue_engine.foundation import sql as queries
from queue_engine.producer.followups import FollowUpBuffer
from queue_engine.testing import drain
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Conn = psycopg.Connection[Any]


def _tasks() -> Any:
    return followups_app.private_registry()


def _run(dsn: str, conn: Conn, job_ids: list[int], wanted: set[str]) -> None:
    """Run the ``fu`` queue until every job in ``job_ids`` is in ``wanted``."""

    def done() -> bool:
        rows = conn.execute(
            "SELECT status FROM queue_engine.jobs WHERE id = ANY(%s)", (job_ids,)
        ).fetchall()
        return len(rows) == len(job_ids) and all(r[0] in wanted for r in rows)

    with running_worker(dsn, tasks=_tasks(), queue=QUEUE):
        wait_until(done, what=f"jobs {job_ids} in {wanted}")


def _followups(conn: Conn, parent_id: int) -> list[dict[str, Any]]:
    """The jobs whose 'created' event names ``parent_id``, in id order."""
    cur = conn.execute(
        "SELECT j.*, e.message AS created_message, e.attempt AS created_attempt"
        " FROM queue_engine.jobs j JOIN queue_engine.job_events e"
        "   ON e.job_id = j.id AND e.kind = 'created'"
        " WHERE e.message LIKE %s ORDER BY j.id",
        (f"follow-up of job {parent_id} %",),
    )
    names = [d.name for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _out_count(conn: Conn) -> int:
    row = conn.execute("SELECT count(*) FROM queue_engine.jobs WHERE queue <> %s", (QUEUE,))
    return int(row.fetchone()[0])  # type: ignore[index]


def _job(conn: Conn, job_id: int) -> tuple[str, int, Any, Any]:
    row = conn.execute(
        "SELECT status, attempt, result, error FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2], row[3]


def test_a_success_inserts_its_followups_with_every_option(
    dsn: str, client: Client, conn: Conn
) -> None:
    run_at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    children = [
        {
            "task": "followups.child",
            "queue": "fu.elsewhere",
            "args": {"n": 1, "nested": {"a": [1, 2]}},
            "priority": 7,
            "run_at": run_at.isoformat(),
            "max_attempts": 9,
            "timeout_s": 33,
            "lease_ttl_s": 44,
            "idempotency_key": "idem-1",
            "dedupe_key": "dedupe-1",
            "lock_key": "lock-1",
            "partition_key": "part-1",
            "producer": "my-producer",
            "affinity_key": "model-x",
        },
        {"task": "followups.child", "args": {"n": 2}, "delay": 3600},
        {"task": "followups.child", "args": {"n": 3}},
    ]
    parent_id = client.enqueue("followups.parent", queue=QUEUE, args={"children": children}).id
    _run(dsn, conn, [parent_id], {"succeeded", "failed"})
    status, _, _, error = _job(conn, parent_id)
    assert status == "succeeded", error
    first, second, third = _followups(conn, parent_id)
    plain = [k for k in children[0] if k not in ("task", "run_at", "args")]
    assert {k: first[k] for k in plain} == {k: children[0][k] for k in plain}
    assert first["args"] == children[0]["args"] and first["available_at"] == run_at
    assert first["status"] == "queued" and first["attempt"] == 0
    assert second["queue"] == OUT and second["args"] == {"n": 2}
    assert second["priority"] == 100 and second["max_attempts"] == 5  # the defaults
    delay = (second["available_at"] - second["created_at"]).total_seconds()
    assert 3599 <= delay <= 3601
    assert third["available_at"] <= third["created_at"] + timedelta(seconds=1)
    # Producer: the caller's when given, else the parent job; the trail names the attempt.
    assert second["producer"] == third["producer"] == f"job:{parent_id}"
    assert {f["created_message"] for f in (first, second, third)} == {
        f"follow-up of job {parent_id} (attempt 1)"
    }
    assert first["id"] < second["id"] < third["id"]  # buffer order


def test_keys_already_taken_are_skipped_like_the_clients_enqueue(
    dsn: str, client: Client, conn: Conn
) -> None:
    taken = client.enqueue("followups.child", queue=OUT, idempotency_key="taken").id
    active = client.enqueue("followups.child", queue=OUT, dedupe_key="active").id
    children = [
        {"task": "followups.child", "idempotency_key": "taken"},
        {"task": "followups.child", "dedupe_key": "active"},
        {"task": "followups.child", "idempotency_key": "fresh", "args": {"first": True}},
        {"task": "followups.child", "idempotency_key": "fresh", "args": {"first": False}},
        {"task": "followups.child", "args": {"plain": True}},
    ]
    parent_id = client.enqueue("followups.parent", queue=QUEUE, args={"children": children}).id
    _run(dsn, conn, [parent_id], {"succeeded", "failed"})
    assert _job(conn, parent_id)[0] == "succeeded"
    made = _followups(conn, parent_id)
    assert [(f["idempotency_key"], f["args"]) for f in made] == [
        ("fresh", {"first": True}),
        (None, {"plain": True}),
    ]
    assert _out_count(conn) == 4  # the two existing jobs and the two new ones
    assert {taken, active} < {r[0] for r in conn.execute("SELECT id FROM queue_engine.jobs")}


@pytest.mark.parametrize(
    ("args", "final"),
    [
        ({"permanent": True}, "failed"),
        ({"fail_times": 9}, "failed"),  # every attempt fails: retried, then failed
        ({"snooze": 3600}, "queued"),
        ({"bad_result": True}, "failed"),
    ],
    ids=["permanent", "retries-then-fails", "snooze", "result-not-json"],
)
def test_an_outcome_other_than_success_inserts_none(
    dsn: str, client: Client, conn: Conn, args: dict[str, Any], final: str
) -> None:
    children = [{"task": "followups.child", "args": {"n": i}} for i in range(3)]
    parent_id = client.enqueue(
        "followups.parent", queue=QUEUE, args={"children": children, **args}
    ).id
    if final == "queued":

        def snoozed() -> bool:
            return bool(
                conn.execute(
                    "SELECT 1 FROM queue_engine.job_events WHERE job_id = %s AND kind = 'snoozed'",
                    (parent_id,),
                ).fetchone()
            )

        with running_worker(dsn, tasks=_tasks(), queue=QUEUE):
            wait_until(snoozed, what="the snooze")
    else:
        _run(dsn, conn, [parent_id], {final})
    assert _job(conn, parent_id)[0] == final
    assert _out_count(conn) == 0 and _followups(conn, parent_id) == []


def test_a_canceled_job_inserts_none(dsn: str, client: Client, conn: Conn) -> None:
    children = [{"task": "followups.child"}]
    parent_id = client.enqueue(
        "followups.parent", queue=QUEUE, args={"children": children, "wait_cancel": True}
    ).id
    with running_worker(dsn, tasks=_tasks(), queue=QUEUE):
        wait_until(lambda: _job(conn, parent_id)[0] == "running", what="the job to run")
        client.cancel(parent_id)
        wait_until(lambda: _job(conn, parent_id)[0] == "canceled", what="the cancel")
    assert _out_count(conn) == 0


def test_a_retried_job_inserts_its_followups_once_from_the_attempt_that_succeeded(
    dsn: str, client: Client, conn: Conn
) -> None:
    children = [{"task": "followups.child", "args": {"n": i}} for i in range(2)]
    parent_id = client.enqueue(
        "followups.parent", queue=QUEUE, args={"children": children, "fail_times": 2}
    ).id
    _run(dsn, conn, [parent_id], {"succeeded", "failed"})
    assert _job(conn, parent_id)[:2] == ("succeeded", 3)
    made = _followups(conn, parent_id)
    assert [f["args"] for f in made] == [{"n": 0}, {"n": 1}]
    assert {f["created_message"] for f in made} == {f"follow-up of job {parent_id} (attempt 3)"}
    assert _out_count(conn) == 2


def test_a_zombie_finish_inserts_none(client: Client, conn: Conn) -> None:
    """The guarded finish: an attempt recovered and re-claimed meanwhile inserts nothing."""
    parent_id = client.enqueue("followups.parent", queue=QUEUE).id
    (first,) = store.finish_and_claim(conn, S, worker_id="w1", queue=QUEUE, claim_limit=1).claimed
    # The lease runs out and the reaper gives the job back; another worker claims it.
    conn.execute(
        queries.query("reap_expired", S),
        {"now": datetime.now(UTC) + timedelta(hours=1), "limit": 10, "jobs_channel": "x"},
    )
    (second,) = store.finish_and_claim(conn, S, worker_id="w2", queue=QUEUE, claim_limit=1).claimed
    assert (second.id, second.attempt) == (parent_id, 2)

    def buffered(attempt: int) -> tuple[str, ...]:
        buffer = FollowUpBuffer(parent_id, attempt)
        buffer.add("followups.child", {"queue": OUT, "args": {"attempt": attempt}})
        return buffer.encoded()

    late = oc.succeeded(first, "late", 1, followups=buffered(1))
    assert store.finish_only(conn, S, worker_id="w1", queue=QUEUE, outcomes=[late]) == {}
    assert _out_count(conn) == 0
    # The same zombie with the live attempt's number but the wrong worker: nothing either.
    forged = oc.succeeded(second, "forged", 1, followups=buffered(2))
    assert store.finish_only(conn, S, worker_id="w1", queue=QUEUE, outcomes=[forged]) == {}
    assert _out_count(conn) == 0
    real = oc.succeeded(second, "real", 1, followups=buffered(2))
    assert store.finish_only(conn, S, worker_id="w2", queue=QUEUE, outcomes=[real]) == {
        parent_id: "succeeded"
    }
    assert [f["args"] for f in _followups(conn, parent_id)] == [{"attempt": 2}]
    # A second finish of that attempt (a duplicate) matches nothing and inserts nothing.
    assert store.finish_only(conn, S, worker_id="w2", queue=QUEUE, outcomes=[real]) == {}
    assert _out_count(conn) == 1


def test_a_batch_inserts_the_followups_of_its_applied_successes_only(
    client: Client, conn: Conn
) -> None:
    ids = [client.enqueue("followups.parent", queue=QUEUE).id for _ in range(3)]
    jobs = store.finish_and_claim(conn, S, worker_id="w1", queue=QUEUE, claim_limit=3).claimed
    outcomes = []
    for job in jobs:
        buffer = FollowUpBuffer(job.id, job.attempt)
        buffer.add_many([{"task": "followups.child", "queue": OUT, "args": {"of": job.id}}] * 2)
        if job.id == ids[1]:
            outcomes.append(oc.from_exception(job, RuntimeError("boom"), 1))
        else:
            outcomes.append(oc.succeeded(job, None, 1, followups=buffer.encoded()))
    store.finish_only(conn, S, worker_id="w1", queue=QUEUE, outcomes=outcomes)
    assert [len(_followups(conn, i)) for i in ids] == [2, 0, 2]


def test_generator_handlers_and_chains_hand_work_on(dsn: str, client: Client, conn: Conn) -> None:
    steps_id = client.enqueue("followups.steps", queue=QUEUE, args={"n": 3}).id
    chain_id = client.enqueue("followups.chain", queue=QUEUE, args={"left": 3}).id

    def chain_done() -> bool:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*)"
            " FROM queue_engine.jobs WHERE task = 'followups.chain'"
        ).fetchone()
        return row == (4, 4)

    with running_worker(dsn, tasks=_tasks(), queue=QUEUE):
        wait_until(chain_done, what="the chain of four")
        wait_until(lambda: _job(conn, steps_id)[0] == "succeeded", what="the generator")
    assert [f["args"] for f in _followups(conn, steps_id)] == [{"n": 0}, {"n": 1}, {"n": 2}]
    results = conn.execute(
        "SELECT result FROM queue_engine.jobs WHERE task = 'followups.chain' ORDER BY id"
    ).fetchall()
    assert [r[0] for r in results] == [3, 2, 1, 0]
    assert _followups(conn, chain_id)[0]["args"] == {"left": 2}


def test_bad_options_raise_in_the_handler_and_buffer_nothing(
    dsn: str, client: Client, conn: Conn
) -> None:
    single = [
        {"task": "followups.child", "priority": 5000},
        {"task": "bad task!"},
        {"task": "followups.child", "queue": "no spaces"},
        {"task": "followups.child", "args": [1, 2]},
        {"task": "followups.child", "delay": -1},
        {"task": "followups.child", "idempotency_key": ""},
        {"task": "followups.child", "prority": 1},
    ]
    many = [
        {"task": "followups.child", "queue": OUT},
        {"task": "followups.child", "prority": 1},
    ]
    job_id = client.enqueue(
        "followups.bad_options", queue=QUEUE, args={"single": single, "many": many}
    ).id
    _run(dsn, conn, [job_id], {"succeeded", "failed"})
    status, _, result, error = _job(conn, job_id)
    assert status == "succeeded", error
    errors = result["errors"]
    assert len(errors) == len(single) + 1
    assert "priority must be between 0 and 1000, got 5000" in errors[0]
    assert "invalid task name 'bad task!'" in errors[1]
    assert "invalid queue name 'no spaces'" in errors[2]
    assert "args must be a dict" in errors[3]
    assert "delay must be a finite number of seconds >= 0" in errors[4]
    assert "idempotency_key must be a non-empty string" in errors[5]
    assert errors[6].startswith("TypeError") and "prority" in errors[6]
    assert "jobs[1]: unknown option 'prority', did you mean 'priority'?" in errors[7]
    # Only the one good follow-up was buffered (a bad bulk buffers none of its items).
    assert result["buffered"] == 1
    assert [f["args"] for f in _followups(conn, job_id)] == [{"good": True}]


def test_an_uncaught_validation_error_fails_the_job_and_says_why(
    dsn: str, client: Client, conn: Conn
) -> None:
    job_id = client.enqueue("followups.raise_bad", queue=QUEUE).id
    _run(dsn, conn, [job_id], {"succeeded", "failed"})
    status, _, _, error = _job(conn, job_id)
    assert status == "failed"
    assert "ValidationError: priority must be between 0 and 1000, got 5000" in error
    assert _out_count(conn) == 0


def test_more_followups_than_the_cap_raise_in_the_handler(
    dsn: str, client: Client, conn: Conn
) -> None:
    job_id = client.enqueue("followups.too_many", queue=QUEUE, args={"n": 1001}).id
    _run(dsn, conn, [job_id], {"succeeded", "failed"})
    status, _, _, error = _job(conn, job_id)
    assert status == "failed"
    assert "a job may buffer at most 1000 follow-ups (ctx.enqueue), this one would have 1001" in (
        error
    )
    assert _out_count(conn) == 0


def test_the_testing_kits_drain_runs_followups(client: Client, conn: Conn) -> None:
    chain_id = client.enqueue("followups.chain", queue=QUEUE, args={"left": 2}).id
    parent_id = client.enqueue(
        "followups.parent", queue=QUEUE, args={"children": [{"task": "followups.child"}]}
    ).id
    runs = drain(client, queue=QUEUE, tasks=_tasks())
    assert [(r.task, r.status) for r in runs if r.task == "followups.chain"] == [
        ("followups.chain", "succeeded")
    ] * 3
    assert [r.result for r in runs if r.task == "followups.chain"] == [2, 1, 0]
    assert _followups(conn, chain_id)[0]["args"] == {"left": 1}
    # A follow-up to another queue is enqueued there, for that queue's drain.
    [child] = _followups(conn, parent_id)
    assert (child["queue"], child["status"]) == (OUT, "queued")
    runs = drain(client, queue=OUT, tasks=_tasks())
    assert [(r.job_id, r.status) for r in runs] == [(child["id"], "succeeded")]
