"""The worker loop against a real Postgres, run in a thread of the test process.

The console-script behaviour (signals, exit codes, logs) is in
``tests/process/test_worker_process.py``; here the loop's database behaviour:
outcomes, retries, snooze, cancel, progress, priority, delays, prefetch, and
waiting for the schema.
"""

from __future__ import annotations

import itertools
import sys
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
import qe_worker_tasks
from support.workers import all_in, running_worker, statuses, wait_until

from queue_engine import Client
from queue_engine.foundation.migrate import Migrator
from queue_engine.testing import drain

Q = "wt"
#: The test tasks, for the testing kit's drain (a real worker in a thread, like running_worker).
TASKS = qe_worker_tasks.private_registry()


def _job(conn: psycopg.Connection[tuple[object, ...]], job_id: int) -> dict[str, object]:
    cur = conn.execute("SELECT * FROM queue_engine.jobs WHERE id = %s", (job_id,))
    names = [d.name for d in cur.description or []]
    row = cur.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


def _events(conn: psycopg.Connection[tuple[object, ...]], job_id: int) -> list[tuple[object, ...]]:
    return conn.execute(
        "SELECT kind, attempt, worker_id, at FROM queue_engine.job_events"
        " WHERE job_id = %s ORDER BY id",
        (job_id,),
    ).fetchall()


def test_every_handler_kind_runs_and_stores_result_and_progress(
    dsn: str, client: Client, conn
) -> None:
    ids = {
        "echo": client.enqueue("echo", queue=Q, args={"x": 1}).id,
        "async_echo": client.enqueue("async_echo", queue=Q, args={"y": 2}).id,
        "steps": client.enqueue("steps", queue=Q, args={"n": 4}).id,
        "async_steps": client.enqueue("async_steps", queue=Q, args={"n": 3}).id,
    }
    with running_worker(dsn) as worker:
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="jobs finished")
    assert set(statuses(dsn).values()) == {"succeeded"}
    assert _job(conn, ids["echo"])["result"] == {"echo": {"x": 1}}
    assert _job(conn, ids["async_echo"])["result"] == {"async": {"y": 2}}
    steps = _job(conn, ids["steps"])
    assert steps["result"] == {"total": 4, "attempt": 1}
    assert steps["progress"] == {"step": 4, "of": 4}
    assert steps["duration_ms"] is not None and steps["finished_at"] is not None
    agen = _job(conn, ids["async_steps"])
    assert agen["result"] is None and agen["progress"] == {"step": 3}
    kinds = [e[0] for e in _events(conn, ids["echo"])]
    assert kinds == ["claimed", "succeeded"]
    assert {e[2] for e in _events(conn, ids["echo"])} == {worker.worker_id}
    row = conn.execute(
        "SELECT role, queue, state, backend_pid IS NOT NULL, stopped_at IS NOT NULL"
        " FROM queue_engine.workers WHERE id = %s",
        (worker.worker_id,),
    ).fetchone()
    assert row == ("worker", Q, "stopped", True, True)


def test_retry_uses_the_task_backoff_then_succeeds(dsn: str, client: Client, conn) -> None:
    job_id = client.enqueue("backoff", queue=Q, args={"fail_times": 2}, max_attempts=4).id
    with running_worker(dsn):
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="backoff job finished")
    job = _job(conn, job_id)
    assert job["status"] == "succeeded" and job["attempt"] == 3 and job["result"] == 3
    events = _events(conn, job_id)
    assert [e[0] for e in events] == [
        "claimed",
        "retry_scheduled",
        "claimed",
        "retry_scheduled",
        "claimed",
        "succeeded",
    ]
    # ExponentialBackoff(base 0.1 s, factor 2, no jitter): 0.1 s after attempt 1, 0.2 s after 2.
    # Each retry's claim comes no earlier than the failure's time plus that delay.
    (_, _, _, fail1), (_, _, _, claim2) = events[1], events[2]
    (_, _, _, fail2), (_, _, _, claim3) = events[3], events[4]
    assert claim2 >= fail1 + timedelta(seconds=0.1)  # type: ignore[operator]
    assert claim3 >= fail2 + timedelta(seconds=0.2)  # type: ignore[operator]
    # The last re-queue stamped available_at = its finish time + 0.2 s exactly (same now()).
    assert job["available_at"] == fail2 + timedelta(seconds=0.2)  # type: ignore[operator]


def test_attempts_spent_fails_with_traceback(client: Client, conn) -> None:
    job_id = client.enqueue("flaky", queue=Q, args={"fail_times": 5}, max_attempts=2).id
    runs = drain(client, queue=Q, tasks=TASKS, run_delayed=True)
    assert [(o.attempt, o.status) for o in runs] == [(1, "queued"), (2, "failed")]
    error = str(client.get(job_id).error)
    assert "RuntimeError: flaky failure on attempt 2" in error and "Traceback" in error
    assert [e[0] for e in _events(conn, job_id)][-1] == "failed"


def test_permanent_fails_at_once(client: Client) -> None:
    job_id = client.enqueue("permanent", queue=Q, max_attempts=5).id
    [run] = drain(client, queue=Q, tasks=TASKS)
    assert (run.job_id, run.attempt, run.status) == (job_id, 1, "failed")
    assert run.error == "Permanent: this input can never work"


def test_snooze_requeues_without_spending_an_attempt(
    dsn: str, client: Client, conn, tmp_path: Path
) -> None:
    marker = tmp_path / "snoozed"
    job_id = client.enqueue("snooze_once", queue=Q, args={"marker": str(marker)}).id
    with running_worker(dsn):
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="snoozed job finished")
    job = _job(conn, job_id)
    assert job["status"] == "succeeded" and job["result"] == "woke up"
    assert job["attempt"] == 1  # the snoozed run did not count
    kinds = [(e[0], e[1]) for e in _events(conn, job_id)]
    assert kinds == [("claimed", 1), ("snoozed", 1), ("claimed", 1), ("succeeded", 1)]


def test_canceled_queued_job_is_never_run(dsn: str, client: Client, conn) -> None:
    canceled = client.enqueue("echo", queue=Q, args={"n": 1}).id
    client.cancel(canceled)
    later = client.enqueue("echo", queue=Q, args={"n": 2}, priority=500).id
    with running_worker(dsn):
        wait_until(lambda: statuses(dsn)[later] == "succeeded", what="later job ran")
    assert statuses(dsn)[canceled] == "canceled"
    assert "claimed" not in [e[0] for e in _events(conn, canceled)]


def test_cancel_of_a_running_generator_stops_it_at_a_checkpoint(
    dsn: str, client: Client, conn
) -> None:
    job_id = client.enqueue("wait_cancel", queue=Q, args={"max_s": 60}).id
    with running_worker(dsn):
        wait_until(lambda: statuses(dsn)[job_id] == "running", what="job running")
        client.cancel(job_id)
        wait_until(lambda: statuses(dsn)[job_id] == "canceled", what="job canceled")
    assert [e[0] for e in _events(conn, job_id)] == ["claimed", "cancel_requested", "canceled"]


def test_unknown_task_fails_naming_the_registered_tasks(dsn: str, client: Client, conn) -> None:
    job_id = client.enqueue("no.such.task", queue=Q).id
    with running_worker(dsn):
        wait_until(all_in(dsn, {"failed"}), what="unknown task failed")
    job = _job(conn, job_id)
    assert job["attempt"] == 1
    assert "unknown task 'no.such.task'" in str(job["error"])
    assert "echo" in str(job["error"]) and "steps" in str(job["error"])


def test_non_json_result_fails_with_a_clear_error(client: Client) -> None:
    job_id = client.enqueue("bad_result", queue=Q).id
    [run] = drain(client, queue=Q, tasks=TASKS)
    assert (run.job_id, run.status) == (job_id, "failed")
    assert "not JSON-serialisable" in str(run.error)


def test_values_postgres_cannot_store_fail_the_job_not_the_worker(
    dsn: str, client: Client, conn
) -> None:
    nul_error = client.enqueue("nul_error", queue=Q, max_attempts=1).id
    nul_result = client.enqueue("echo", queue=Q, args={"text": "nul here: \\u0000"}).id
    after = client.enqueue("echo", queue=Q, args={"ok": True}, priority=900).id
    with running_worker(dsn):
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="jobs finished")
    assert statuses(dsn) == {nul_error: "failed", nul_result: "succeeded", after: "succeeded"}
    assert "a message with a NUL" in str(_job(conn, nul_error)["error"])


def test_single_worker_runs_jobs_in_priority_order(dsn: str, client: Client, conn) -> None:
    priorities = [500, 10, 300, 10, 0, 999, 100]
    ids = [
        client.enqueue("echo", queue=Q, args={"i": i}, priority=p).id
        for i, p in enumerate(priorities)
    ]
    with running_worker(dsn):
        wait_until(all_in(dsn, {"succeeded"}), what="all succeeded")
    ran = [
        r[0]
        for r in conn.execute(
            "SELECT job_id FROM queue_engine.job_events WHERE kind = 'claimed' ORDER BY id"
        )
    ]
    expected = [i for _, i in sorted(zip(priorities, ids, strict=True))]
    assert ran == expected


def test_delayed_job_is_not_claimed_before_it_is_due(dsn: str, client: Client, conn) -> None:
    delayed = client.enqueue("echo", queue=Q, delay=1.0).id
    now_job = client.enqueue("echo", queue=Q).id
    with running_worker(dsn):
        wait_until(all_in(dsn, {"succeeded"}), what="both succeeded")
    assert statuses(dsn)[now_job] == "succeeded"
    job = _job(conn, delayed)
    assert job["started_at"] >= job["available_at"]  # type: ignore[operator]


def test_worker_waits_for_migrations_then_works(empty_dsn: str) -> None:
    with running_worker(empty_dsn) as worker:
        # The worker is up and waiting; nothing to assert on it but that it did not crash.
        assert not worker.stopping
        Migrator(empty_dsn).up()
        with Client(empty_dsn) as client:
            job_id = client.enqueue("echo", queue=Q, args={"late": True}).id
        wait_until(lambda: statuses(empty_dsn).get(job_id) == "succeeded", what="job ran")


def test_prefetch_runs_all_jobs_one_at_a_time(dsn: str, client: Client, conn) -> None:
    from support.workers import create_log_table

    create_log_table(dsn)
    ids = client.enqueue_many(
        [{"task": "record", "queue": Q, "args": {"sleep": 0.005}} for _ in range(30)]
    )
    with running_worker(dsn, prefetch=8):
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="all finished")
    assert set(statuses(dsn).values()) == {"succeeded"}
    rows = conn.execute("SELECT started, ended FROM worker_test_log ORDER BY started").fetchall()
    assert len(rows) == len(ids)
    for (_s1, e1), (s2, _e2) in itertools.pairwise(rows):
        assert e1 <= s2, "two jobs of one worker overlapped"
    claim_batches = conn.execute(
        "SELECT count(DISTINCT at) FROM queue_engine.job_events WHERE kind = 'claimed'"
    ).fetchone()
    assert claim_batches is not None and claim_batches[0] < len(ids)


@pytest.mark.parametrize("prefetch", [1, 4])
def test_stop_gives_back_unstarted_prefetched_jobs(
    dsn: str, client: Client, conn, prefetch: int
) -> None:
    from support.workers import create_log_table

    create_log_table(dsn)
    ids = client.enqueue_many(
        [{"task": "record", "queue": Q, "args": {"sleep": 0.3}} for _ in range(6)]
    )
    with running_worker(dsn, prefetch=prefetch):
        wait_until(
            lambda: conn.execute("SELECT count(*) FROM worker_test_log").fetchone()[0] >= 1,
            what="first job ran",
        )
    current = statuses(dsn)
    assert "running" not in current.values()
    done = [i for i in ids if current[i] == "succeeded"]
    back = [i for i in ids if current[i] == "queued"]
    assert done and back and len(done) + len(back) == len(ids)
    for job_id in back:
        job = _job(conn, job_id)
        assert job["attempt"] == 0, "a given-back job must not spend an attempt"
    if prefetch > 1:
        released = conn.execute(
            "SELECT count(*) FROM queue_engine.job_events WHERE kind = 'released'"
        ).fetchone()
        assert released is not None and released[0] >= 1


def test_an_idle_safety_poll_probes_and_claims_only_when_a_job_is_due(
    dsn: str, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle polls send the cheap probe; the claim runs for a due job (here a delayed
    one, which no NOTIFY announces) and not otherwise."""
    from queue_engine.worker import store

    calls = {"claim": 0, "probe": 0}
    real_claim, real_probe = store.finish_and_claim, store.any_due

    def claim(*args: object, **kwargs: object) -> object:
        calls["claim"] += 1
        return real_claim(*args, **kwargs)  # type: ignore[arg-type]

    def probe(*args: object, **kwargs: object) -> bool:
        calls["probe"] += 1
        return real_probe(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "finish_and_claim", claim)
    monkeypatch.setattr(store, "any_due", probe)
    with running_worker(dsn, poll_s=0.05):
        wait_until(lambda: calls["probe"] >= 10, what="ten idle polls")
        assert calls["claim"] <= 2  # the first claim at start, none per idle poll
        delayed = client.enqueue("echo", queue=Q, delay=0.3).id
        wait_until(lambda: statuses(dsn).get(delayed) == "succeeded", what="delayed job ran")
    assert calls["claim"] >= 2


def test_idle_workers_of_a_queue_share_the_safety_poll_rate(
    dsn: str, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four idle workers count each other in the probe and space their polls: at
    POLL_S = 0.02 s each would probe 50 times a second (200 in all); sharing a
    rate of 2 polls a second they probe a few times in two seconds. A delayed
    job (announced by no NOTIFY) is still found by one of their polls."""
    import time

    from queue_engine.worker import store

    probes: list[int] = []
    real_probe = store.any_due

    def probe(*args: object, **kwargs: object) -> tuple[bool, int]:
        result = real_probe(*args, **kwargs)  # type: ignore[arg-type]
        probes.append(result[1])
        return result

    monkeypatch.setattr(store, "any_due", probe)
    settings = {"poll_s": 0.02, "queue_poll_rate": 2.0}
    with (
        running_worker(dsn, **settings) as a,
        running_worker(dsn, **settings) as b,
        running_worker(dsn, **settings) as c,
        running_worker(dsn, **settings) as d,
    ):
        fleet = (a, b, c, d)
        # Every worker has probed and seen the other three (the probe counts them).
        wait_until(lambda: all(w.idle_workers == 4 for w in fleet), what="all saw 4 idle")
        # Each now waits 4 / 2 = 2 s x (0.5-1.5) between polls, not 0.02 s.
        assert all(1.0 <= w.idle_poll_s() < 3.0 for w in fleet)
        before = len(probes)
        time.sleep(2.0)
        # At most one probe per worker per second (1.0 s is the shortest spaced
        # wait), plus one in flight each: far below the 200 of unshared polls.
        assert len(probes) - before <= 4 * 3
        delayed = client.enqueue("echo", queue=Q, delay=0.2).id
        wait_until(
            lambda: statuses(dsn).get(delayed) == "succeeded", timeout=40, what="delayed job ran"
        )


def test_a_handler_calling_sys_exit_fails_its_attempt_and_the_worker_goes_on(
    dsn: str, client: Client, conn
) -> None:
    from queue_engine.producer.tasks import TaskDefinition, TaskRegistry

    def bail(args: dict[str, object]) -> None:
        sys.exit(3)

    def fine(args: dict[str, object]) -> str:
        return "ok"

    registry = TaskRegistry()
    registry.register(TaskDefinition(name="bail", handler=bail, queue=Q, max_attempts=1))
    registry.register(TaskDefinition(name="fine", handler=fine, queue=Q))
    exiting = client.enqueue("bail", queue=Q).id
    after = client.enqueue("fine", queue=Q, priority=200).id
    with running_worker(dsn, tasks=registry):
        wait_until(all_in(dsn, {"failed", "succeeded"}), what="both jobs ended")
    assert statuses(dsn) == {exiting: "failed", after: "succeeded"}
    job = _job(conn, exiting)
    assert "SystemExit: 3" in str(job["error"])
    messages = conn.execute(
        "SELECT message FROM queue_engine.job_events WHERE job_id = %s AND kind = 'failed'",
        (exiting,),
    ).fetchall()
    assert messages and "the handler called sys.exit(3); the worker kept running" in messages[0][0]
