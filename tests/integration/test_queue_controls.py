"""Pause and resume (``queue-ctl pause`` / ``resume``) against a real Postgres.

The claim statement itself is checked directly (deterministic: a paused queue
claims nothing, its finishes still apply, other queues are unaffected), then
with in-process workers (a paused queue's jobs wait while another queue's run,
a running job finishes while its queue is paused, a resume wakes idle workers
through NOTIFY well before their poll), then the CLI as an operator runs it.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from support.ctl import queue_ctl
from support.workers import running_worker, statuses, wait_until

from queue_engine import Client
from queue_engine.foundation.errors import ValidationError
from queue_engine.operator import stats
from queue_engine.operator.controls import pause_queue, resume_queue
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

SCHEMA = "queue_engine"
Q = "wt"


def _claim(conn: psycopg.Connection[Any], queue: str, **kw: Any) -> store.FinishClaimResult:
    return store.finish_and_claim(conn, SCHEMA, worker_id="w-test", queue=queue, **kw)


def _paused(conn: psycopg.Connection[Any], queue: str) -> tuple[Any, ...] | None:
    return conn.execute(
        "SELECT paused, paused_at IS NOT NULL FROM queue_engine.queues WHERE name = %s", (queue,)
    ).fetchone()


# -- the claim statement -----------------------------------------------------------


def test_paused_queue_claims_nothing_and_other_queues_still_do(client: Client, conn) -> None:
    a = client.enqueue("t.a", queue="qa").id
    b = client.enqueue("t.b", queue="qb").id
    pause_queue(conn, SCHEMA, "qa")
    assert _claim(conn, "qa", claim_limit=5).claimed == []
    assert [j.id for j in _claim(conn, "qb", claim_limit=5).claimed] == [b]
    assert statuses_of(conn) == {a: "queued", b: "running"}
    resume_queue(conn, SCHEMA, "qa")
    assert [j.id for j in _claim(conn, "qa", claim_limit=5).claimed] == [a]


def test_finish_still_applies_while_the_queue_is_paused(client: Client, conn) -> None:
    first = client.enqueue("t.a", queue="qa", priority=1).id
    second = client.enqueue("t.a", queue="qa", priority=2).id
    (job,) = _claim(conn, "qa", claim_limit=1).claimed
    assert job.id == first
    pause_queue(conn, SCHEMA, "qa")
    result = _claim(conn, "qa", claim_limit=1, outcomes=[oc.succeeded(job, {"ok": 1}, 5, None)])
    assert result.finished == {first: "succeeded"}
    assert result.claimed == []
    assert statuses_of(conn) == {first: "succeeded", second: "queued"}


def test_pause_and_resume_are_idempotent_upserts(conn) -> None:
    assert _paused(conn, "fresh.q") is None
    first = pause_queue(conn, SCHEMA, "fresh.q")
    assert not first.was_paused and _paused(conn, "fresh.q") == (True, True)
    again = pause_queue(conn, SCHEMA, "fresh.q")
    assert again.was_paused and again.paused_at == first.paused_at
    assert resume_queue(conn, SCHEMA, "fresh.q").was_paused
    assert _paused(conn, "fresh.q") == (False, False)
    assert not resume_queue(conn, SCHEMA, "fresh.q").was_paused
    assert not resume_queue(conn, SCHEMA, "never.paused").was_paused
    assert _paused(conn, "never.paused") == (False, False)


def test_bad_queue_names_are_refused_before_any_write(conn) -> None:
    for bad in ("", "-starts-with-dash", "has space", "x" * 65):
        with pytest.raises(ValidationError):
            pause_queue(conn, SCHEMA, bad)
    assert conn.execute("SELECT count(*) FROM queue_engine.queues").fetchone() == (0,)


def test_resume_notifies_the_queue_on_the_jobs_channel(dsn: str, conn) -> None:
    pause_queue(conn, SCHEMA, "qa")
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute('LISTEN "queue_engine.jobs"')
        resume_queue(conn, SCHEMA, "qa")
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
    assert got == [("queue_engine.jobs", "qa")]


def test_stats_show_paused_queues_even_without_jobs(conn, client: Client) -> None:
    client.enqueue("t.a", queue="busy.q")
    pause_queue(conn, SCHEMA, "empty.q")
    pause_queue(conn, SCHEMA, "busy.q")
    pause_queue(conn, SCHEMA, "resumed.q")
    resume_queue(conn, SCHEMA, "resumed.q")
    rows = {q.queue: q for q in stats.queue_stats(conn, SCHEMA)}
    assert set(rows) == {"busy.q", "empty.q"}
    assert rows["busy.q"].paused and rows["busy.q"].queued == 1
    assert rows["empty.q"].paused and rows["empty.q"].queued == 0
    resume_queue(conn, SCHEMA, "busy.q")
    (only,) = stats.queue_stats(conn, SCHEMA, queue="busy.q")
    assert not only.paused
    assert stats.queue_stats(conn, SCHEMA, queue="empty.q")[0].paused


def statuses_of(conn: psycopg.Connection[Any]) -> dict[int, str]:
    return dict(conn.execute("SELECT id, status FROM queue_engine.jobs").fetchall())


# -- workers -----------------------------------------------------------------------


def test_workers_skip_a_paused_queue_while_other_queues_run(dsn: str, client: Client, conn) -> None:
    pause_queue(conn, SCHEMA, Q)
    held = [client.enqueue("echo", queue=Q, args={"i": i}).id for i in range(3)]
    other = [client.enqueue("echo", queue="other", args={"i": i}).id for i in range(3)]
    with running_worker(dsn) as paused_worker, running_worker(dsn, queue="other"):
        wait_until(
            lambda: all(statuses(dsn)[i] == "succeeded" for i in other), what="other queue ran"
        )
        # A negative claim needs a window: 10 poll intervals (poll_s 0.1) of the
        # paused queue's worker, which is alive and heartbeating meanwhile.
        time.sleep(1.0)
        assert {statuses(dsn)[i] for i in held} == {"queued"}
        assert not paused_worker.stopping
    assert conn.execute(
        "SELECT count(*) FROM queue_engine.job_events WHERE job_id = ANY(%s)", (held,)
    ).fetchone() == (0,)


def test_running_job_finishes_while_its_queue_is_paused(dsn: str, client: Client, conn) -> None:
    running = client.enqueue("sleepy", queue=Q, args={"sleep": 2.0}, priority=1).id
    waiting = client.enqueue("echo", queue=Q, priority=2).id
    with running_worker(dsn):
        wait_until(lambda: statuses(dsn)[running] == "running", what="sleepy running")
        pause_queue(conn, SCHEMA, Q)
        wait_until(lambda: statuses(dsn)[running] == "succeeded", what="sleepy finished")
        time.sleep(0.5)  # several poll intervals: the next job must not be claimed
        assert statuses(dsn)[waiting] == "queued"
        resume_queue(conn, SCHEMA, Q)
        wait_until(lambda: statuses(dsn)[waiting] == "succeeded", what="waiting job ran")


def test_resume_wakes_idle_workers_well_before_their_poll(dsn: str, client: Client, conn) -> None:
    pause_queue(conn, SCHEMA, Q)
    # Polling every 60 s: only the resume's NOTIFY can wake these workers in time.
    with running_worker(dsn, poll_s=60.0), running_worker(dsn, poll_s=60.0):
        wait_until(
            lambda: (
                conn.execute(
                    "SELECT count(*) FROM queue_engine.workers WHERE queue = %s AND state = 'idle'",
                    (Q,),
                ).fetchone()
                == (2,)
            ),
            what="two idle workers",
        )
        ids = [client.enqueue("echo", queue=Q, args={"i": i}).id for i in range(4)]
        time.sleep(0.3)  # the enqueue's NOTIFY woke them: they found the queue paused
        assert {statuses(dsn)[i] for i in ids} == {"queued"}
        resumed = time.monotonic()
        resume_queue(conn, SCHEMA, Q)
        wait_until(
            lambda: all(statuses(dsn)[i] == "succeeded" for i in ids),
            timeout=5.0,
            what="jobs claimed after resume",
        )
        assert time.monotonic() - resumed < 5.0


# -- the CLI -----------------------------------------------------------------------


def test_cli_pause_and_resume(dsn: str, conn) -> None:
    paused = queue_ctl("--dsn", dsn, "pause", "load.cbr")
    assert (paused.returncode, paused.stderr) == (0, "")
    assert paused.stdout.startswith("queue load.cbr paused")
    again = queue_ctl("--dsn", dsn, "pause", "load.cbr")
    assert again.returncode == 0 and "already paused" in again.stdout
    assert _paused(conn, "load.cbr") == (True, True)
    out = queue_ctl("--dsn", dsn, "stats", "--json", "--queue", "load.cbr")
    assert out.returncode == 0 and '"paused": true' in out.stdout
    table = queue_ctl("--dsn", dsn, "stats").stdout.splitlines()
    assert table[0].split()[-1] == "PAUSED" and table[1].split()[-1] == "yes"
    resumed = queue_ctl("--dsn", dsn, "resume", "load.cbr")
    assert (resumed.returncode, resumed.stdout.strip()) == (0, "queue load.cbr resumed")
    not_paused = queue_ctl("--dsn", dsn, "resume", "load.cbr")
    assert not_paused.returncode == 0 and "was not paused" in not_paused.stdout
    assert _paused(conn, "load.cbr") == (False, False)


def test_cli_errors_are_one_line(dsn: str, empty_dsn: str) -> None:
    bad = queue_ctl("--dsn", dsn, "pause", "bad queue")
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "queue-ctl: error:" in bad.stderr
    missing = queue_ctl("--dsn", dsn, "resume")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    no_schema = queue_ctl("--dsn", empty_dsn, "pause", "q")
    assert no_schema.returncode == 3, no_schema.stderr
    assert (
        len(no_schema.stderr.strip().splitlines()) == 1 and "queue-ctl migrate" in no_schema.stderr
    )
    unreachable = queue_ctl(
        "--dsn", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "pause", "q"
    )
    assert unreachable.returncode == 69
    assert len(unreachable.stderr.strip().splitlines()) == 1
