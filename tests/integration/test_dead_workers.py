"""Contract of the dead-worker sweep and of fast recovery (real Postgres, real sessions).

Dead-worker sweep (``DeadWorkerSweep.run_once`` / ``sql/sweep_dead_workers.sql``):
a worker whose heartbeat is older than ``dead_after_s`` while it owns a running
job is flagged (``flagged_dead_at``) with one loud ``worker.flagged_dead`` line
naming host, pid, worker id and job ids; a silent worker without a running
job, a fresh one and a stopped one are left alone; a fresh heartbeat clears the
flag; the job itself is not touched (the lease recovers it).

Fast recovery (``FastRecovery.run_once`` / ``sql/sweep_gone_workers.sql``): a
worker whose database session ended is marked ``gone`` and its running jobs go
back (queued / lost / canceled as the reaper decides) with a ``recovered``
event and a NOTIFY per queue; a worker whose session lives is left alone; a
pid reused by a newer session does not keep a dead worker "alive"; rows
heartbeated within ``min_age_s`` and rows from before the server started are
not judged. Workers are registered on real sessions, which are ended with
``pg_terminate_backend``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from typing import Any

import psycopg
import pytest
from support import jobs

from queue_engine.orchestrator import (
    DeadWorkerSweep,
    FastRecovery,
    Orchestrator,
    OrchestratorSettings,
)

SCHEMA = "queue_engine"
Conn = psycopg.Connection[Any]
#: ``running_job(conn, worker_id, ...)``: a job running for ``worker_id`` with a live lease.
running_job = partial(jobs.running_job, task="live.ness", max_attempts=3)


def add_worker(
    conn: Conn,
    worker_id: str,
    *,
    heartbeat: str = "0 seconds",
    backend_pid: int | None = None,
    stopped: bool = False,
) -> None:
    """A workers row heartbeated ``heartbeat`` ago (``backend_pid`` None: this session's)."""
    conn.execute(
        "INSERT INTO queue_engine.workers (id, role, queue, host, pid, backend_pid, state, "
        "heartbeat_at, stopped_at) VALUES (%s, 'worker', 'q1', 'host-a', 4242, "
        "coalesce(%s, pg_backend_pid()), 'busy', now() - %s::interval, "
        "CASE WHEN %s THEN now() END)",
        (worker_id, backend_pid, heartbeat, stopped),
    )


def worker_row(conn: Conn, worker_id: str) -> dict[str, Any]:
    cur = conn.execute(
        "SELECT state, stopped_at, flagged_dead_at, heartbeat_at, backend_pid "
        "FROM queue_engine.workers WHERE id = %s",
        (worker_id,),
    )
    names = [d.name for d in cur.description or []]
    values = cur.fetchone()
    assert values is not None
    return dict(zip(names, values, strict=True))


def job_row(conn: Conn, job_id: int) -> dict[str, Any]:
    cur = conn.execute(
        "SELECT status, attempt, claimed_by, lease_expires_at, finished_at, error "
        "FROM queue_engine.jobs WHERE id = %s",
        (job_id,),
    )
    names = [d.name for d in cur.description or []]
    values = cur.fetchone()
    assert values is not None
    return dict(zip(names, values, strict=True))


def events(conn: Conn, job_id: int) -> list[tuple[str, str, str]]:
    return [
        (str(k), str(t), str(m))
        for k, t, m in conn.execute(
            "SELECT kind, to_status, message FROM queue_engine.job_events "
            "WHERE job_id = %s ORDER BY id",
            (job_id,),
        ).fetchall()
    ]


def session_pid(conn: Conn) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def terminate(admin: Conn, pid: int) -> None:
    """End a session from outside, as the server does when its process dies; wait until gone."""
    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 30
    while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
        assert time.monotonic() < deadline, f"session {pid} did not end"
        time.sleep(0.02)


@pytest.fixture
def sessions(dsn: str) -> Iterator[list[Conn]]:
    """Extra sessions standing in for worker processes; closed at the end."""
    opened: list[Conn] = []
    yield opened
    for c in opened:
        c.close()


def new_session(dsn: str, sessions: list[Conn]) -> Conn:
    c = psycopg.connect(dsn, autocommit=True)
    sessions.append(c)
    return c


# -- dead-worker sweep -----------------------------------------------------------


def test_sweep_flags_a_silent_worker_that_owns_a_running_job(
    dsn: str, conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    add_worker(conn, "host-a:4242:dead", heartbeat="45 seconds")
    add_worker(conn, "host-a:4243:idle", heartbeat="45 seconds")  # silent, but owns nothing
    add_worker(conn, "host-a:4244:fresh", heartbeat="1 second")
    add_worker(conn, "host-a:4245:stopped", heartbeat="45 seconds", stopped=True)
    job = running_job(conn, "host-a:4242:dead")
    running_job(conn, "host-a:4244:fresh")
    running_job(conn, "host-a:4245:stopped")

    sweep = DeadWorkerSweep(dsn, SCHEMA, dead_after_s=30)
    with caplog.at_level(logging.INFO, logger="queue_engine.dead_workers"):
        result = sweep.run_once()
    sweep.on_stop()

    assert [w.id for w in result.flagged] == ["host-a:4242:dead"]
    assert result.flagged[0].job_ids == [job]
    assert result.cleared == []
    assert worker_row(conn, "host-a:4242:dead")["flagged_dead_at"] is not None
    for other in ("host-a:4243:idle", "host-a:4244:fresh", "host-a:4245:stopped"):
        assert worker_row(conn, other)["flagged_dead_at"] is None
    # The job is the lease's business, not the sweep's.
    assert job_row(conn, job)["status"] == "running"

    [record] = [r for r in caplog.records if "worker.flagged_dead" in r.getMessage()]
    assert record.levelno == logging.ERROR
    line = record.getMessage()
    for expected in (
        "worker_id=host-a:4242:dead",
        "host=host-a",
        "pid=4242",
        f"job_ids={job}",
        "has not heartbeated for 45 s",
        f"running job {job}",
        "lease expires at",
        "GIL",
    ):
        assert expected in line, (expected, line)


def test_sweep_flags_once_and_a_fresh_heartbeat_clears_the_flag(
    dsn: str, conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    add_worker(conn, "w-slow", heartbeat="2 minutes")
    running_job(conn, "w-slow")
    sweep = DeadWorkerSweep(dsn, SCHEMA, dead_after_s=30)
    try:
        assert [w.id for w in sweep.run_once().flagged] == ["w-slow"]
        flagged_at = worker_row(conn, "w-slow")["flagged_dead_at"]
        second = sweep.run_once()
        assert not second.did_work  # still silent: flagged once, not every sweep
        assert worker_row(conn, "w-slow")["flagged_dead_at"] == flagged_at

        conn.execute("UPDATE queue_engine.workers SET heartbeat_at = now() WHERE id = 'w-slow'")
        with caplog.at_level(logging.INFO, logger="queue_engine.dead_workers"):
            third = sweep.run_once()
        assert [w.id for w in third.cleared] == ["w-slow"]
        assert third.flagged == []
        assert worker_row(conn, "w-slow")["flagged_dead_at"] is None
        assert any("worker.flag_cleared" in r.getMessage() for r in caplog.records)
        assert not sweep.run_once().did_work
    finally:
        sweep.on_stop()


def test_sweep_compares_with_a_pinned_clock(dsn: str, conn: Conn) -> None:
    add_worker(conn, "w-now", heartbeat="0 seconds")
    running_job(conn, "w-now")
    db_now = conn.execute("SELECT now()").fetchone()
    assert db_now is not None
    sweep = DeadWorkerSweep(dsn, SCHEMA, dead_after_s=30, now=lambda: db_now[0])
    assert not sweep.run_once().did_work
    sweep.now = lambda: db_now[0] + timedelta(seconds=31)
    assert [w.id for w in sweep.run_once().flagged] == ["w-now"]
    sweep.on_stop()


# -- fast recovery -----------------------------------------------------------------


def test_recovery_gives_back_the_jobs_of_a_worker_whose_session_ended(
    dsn: str, conn: Conn, sessions: list[Conn], caplog: pytest.LogCaptureFixture
) -> None:
    dead, live = new_session(dsn, sessions), new_session(dsn, sessions)
    add_worker(dead, "w-dead")
    add_worker(live, "w-live")
    requeue = running_job(conn, "w-dead", queue="q1")
    other_queue = running_job(conn, "w-dead", queue="q2")
    last = running_job(conn, "w-dead", attempt=3, max_attempts=3)
    cancel = running_job(conn, "w-dead", cancel_requested=True)
    alive = running_job(conn, "w-live")
    dead_pid = session_pid(dead)
    terminate(conn, dead_pid)

    listener = new_session(dsn, sessions)
    listener.execute('LISTEN "queue_engine.jobs"')
    recovery = FastRecovery(dsn, SCHEMA, min_age_s=0)
    with caplog.at_level(logging.INFO, logger="queue_engine.fast_recovery"):
        result = recovery.run_once()
    recovery.on_stop()

    [gone] = result.workers
    assert (gone.id, gone.backend_pid, gone.host, gone.pid) == ("w-dead", dead_pid, "host-a", 4242)
    assert result.requeued == sorted([requeue, other_queue])
    assert result.lost == [last]
    assert result.canceled == [cancel]

    for job_id in (requeue, other_queue):
        row = job_row(conn, job_id)
        assert (row["status"], row["attempt"], row["claimed_by"], row["lease_expires_at"]) == (
            "queued",
            1,
            None,
            None,
        )
        [(kind, to_status, message)] = events(conn, job_id)
        assert (kind, to_status) == ("recovered", "queued")
        assert (
            f"worker w-dead gone: its database session ended (backend pid {dead_pid}; "
            "last heartbeat "
        ) in message
        assert "without waiting for its lease" in message
    lost = job_row(conn, last)
    assert lost["status"] == "lost" and lost["finished_at"] is not None
    assert lost["error"].startswith(
        "the worker process died once while running this job (its database session ended); "
        "last: worker w-dead gone: its database session ended"
    )
    assert lost["error"].endswith("attempts spent (3 of 3)")
    assert events(conn, last)[0][:2] == ("lost", "lost")
    assert job_row(conn, cancel)["status"] == "canceled"
    assert events(conn, cancel)[0][:2] == ("canceled", "canceled")

    # The live worker and its job are untouched.
    assert job_row(conn, alive)["status"] == "running"
    assert worker_row(conn, "w-live")["stopped_at"] is None
    marked = worker_row(conn, "w-dead")
    assert marked["state"] == "gone" and marked["stopped_at"] is not None

    payloads = sorted(n.payload for n in listener.notifies(timeout=1, stop_after=2))
    assert payloads == ["q1", "q2"]
    assert any(
        "worker.gone" in r.getMessage() and "worker_id=w-dead" in r.getMessage()
        for r in caplog.records
    )

    # Done once: the row is marked, a second run finds nothing.
    second = FastRecovery(dsn, SCHEMA, min_age_s=0)
    assert not second.run_once().did_work
    second.on_stop()


def test_recovery_leaves_a_worker_with_a_live_session_alone(
    dsn: str, conn: Conn, sessions: list[Conn]
) -> None:
    live = new_session(dsn, sessions)
    add_worker(live, "w-live")
    job = running_job(conn, "w-live")
    # Seen five minutes on, its heartbeat is old (a hung worker, say): but its
    # session lives, so this is the dead-worker sweep's and the lease's business.
    db_now = conn.execute("SELECT now()").fetchone()
    assert db_now is not None
    recovery = FastRecovery(dsn, SCHEMA, now=lambda: db_now[0] + timedelta(minutes=5))
    assert not recovery.run_once().did_work
    recovery.on_stop()
    assert job_row(conn, job)["status"] == "running"
    assert worker_row(conn, "w-live")["state"] == "busy"


def test_a_pid_reused_by_a_newer_session_does_not_keep_a_dead_worker_alive(
    dsn: str, conn: Conn, sessions: list[Conn]
) -> None:
    # The worker registered (heartbeat_at = t0) and its session ended; later another
    # session got the same pid. Simulated: backend_pid set to a live session that
    # started after t0. It must be judged gone, not alive.
    add_worker(conn, "w-reused", backend_pid=0)
    job = running_job(conn, "w-reused")
    newer = new_session(dsn, sessions)
    conn.execute(
        "UPDATE queue_engine.workers SET backend_pid = %s WHERE id = 'w-reused'",
        (session_pid(newer),),
    )
    started = conn.execute(
        "SELECT a.backend_start > w.heartbeat_at FROM pg_stat_activity a, queue_engine.workers w "
        "WHERE a.pid = w.backend_pid AND w.id = 'w-reused'"
    ).fetchone()
    assert started == (True,)

    recovery = FastRecovery(dsn, SCHEMA, min_age_s=0)
    result = recovery.run_once()
    recovery.on_stop()
    assert [w.id for w in result.workers] == ["w-reused"]
    assert job_row(conn, job)["status"] == "queued"


def test_recovery_does_not_race_a_fresh_row_or_judge_rows_from_before_a_restart(
    dsn: str, conn: Conn, sessions: list[Conn]
) -> None:
    just_now = new_session(dsn, sessions)
    add_worker(just_now, "w-just-now")  # heartbeated now; its session then ends
    fresh_job = running_job(conn, "w-just-now")
    terminate(conn, session_pid(just_now))
    # A row last heartbeated before the server started: the restart ended its session.
    add_worker(conn, "w-old-life", backend_pid=0)
    conn.execute(
        "UPDATE queue_engine.workers SET heartbeat_at = pg_postmaster_start_time() "
        "- interval '1 second' WHERE id = 'w-old-life'"
    )
    old_job = running_job(conn, "w-old-life")

    recovery = FastRecovery(dsn, SCHEMA, min_age_s=60)
    try:
        assert not recovery.run_once().did_work
        assert job_row(conn, fresh_job)["status"] == "running"
        recovery.min_age_s = 0
        result = recovery.run_once()
    finally:
        recovery.on_stop()
    assert [w.id for w in result.workers] == ["w-just-now"]
    assert job_row(conn, fresh_job)["status"] == "queued"
    assert job_row(conn, old_job)["status"] == "running"  # left to the lease
    assert worker_row(conn, "w-old-life")["stopped_at"] is None


def test_a_gone_worker_without_jobs_is_only_marked(
    dsn: str, conn: Conn, sessions: list[Conn]
) -> None:
    idle = new_session(dsn, sessions)
    add_worker(idle, "w-idle")
    add_worker(conn, "w-stopped", backend_pid=0, stopped=True, heartbeat="1 minute")
    terminate(conn, session_pid(idle))
    recovery = FastRecovery(dsn, SCHEMA, min_age_s=0)
    result = recovery.run_once()
    recovery.on_stop()
    [gone] = result.workers
    assert (gone.id, gone.job_ids) == ("w-idle", [])
    assert worker_row(conn, "w-idle")["state"] == "gone"
    assert worker_row(conn, "w-stopped")["state"] == "busy"  # a clean stop is not "gone"


def test_a_stopped_worker_that_left_a_running_job_has_it_given_back(
    dsn: str, conn: Conn, sessions: list[Conn]
) -> None:
    """A handler's SystemExit: the worker stops "cleanly", its job still running under its id."""
    exited = new_session(dsn, sessions)
    add_worker(exited, "w-exited", stopped=True)
    job = running_job(conn, "w-exited")
    add_worker(conn, "w-clean", backend_pid=0, stopped=True)  # no job: left alone
    terminate(conn, session_pid(exited))
    recovery = FastRecovery(dsn, SCHEMA, min_age_s=0)
    try:
        result = recovery.run_once()
        assert not recovery.run_once().did_work  # its job is no longer its own
    finally:
        recovery.on_stop()
    [gone] = result.workers
    assert (gone.id, gone.requeued) == ("w-exited", [job])
    row = job_row(conn, job)
    assert (row["status"], row["claimed_by"]) == ("queued", None)
    assert (
        "last: worker w-exited stopped without finishing this job: its database session "
        in (row["error"])
    )
    assert worker_row(conn, "w-exited")["state"] == "busy"  # the row keeps its own state
    assert worker_row(conn, "w-clean")["state"] == "busy"


# -- wiring ----------------------------------------------------------------------------


def test_orchestrator_runs_both_services_on_the_leader_with_their_settings(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DEAD_AFTER_S", "RECOVERY_S", "HEARTBEAT_S", "SWEEP_S"):
        monkeypatch.delenv(f"QUEUE_ENGINE_{name}", raising=False)
    settings = OrchestratorSettings.from_env(dsn, SCHEMA)
    assert (settings.dead_after, settings.recovery_s) == (30.0, 1.0)
    orch = Orchestrator(settings)
    assert orch.dead_workers in orch.leader_services
    assert orch.fast_recovery in orch.leader_services
    assert orch.dead_workers.dead_after_s == 30.0

    monkeypatch.setenv("QUEUE_ENGINE_HEARTBEAT_S", "2")
    assert OrchestratorSettings.from_env(dsn, SCHEMA).dead_after == 6.0
    monkeypatch.setenv("QUEUE_ENGINE_DEAD_AFTER_S", "90")
    monkeypatch.setenv("QUEUE_ENGINE_RECOVERY_S", "0")
    settings = OrchestratorSettings.from_env(dsn, SCHEMA)
    assert settings.dead_after == 90.0
    orch = Orchestrator(settings)
    assert orch.fast_recovery is None
    assert all(not isinstance(s, FastRecovery) for s in orch.leader_services)


@pytest.mark.parametrize(
    ("name", "value"),
    [("RECOVERY_S", "0.01"), ("RECOVERY_S", "x"), ("DEAD_AFTER_S", "0"), ("DEAD_AFTER_S", "abc")],
)
def test_bad_settings_are_refused_with_the_variable_named(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from queue_engine.foundation.errors import ConfigError

    monkeypatch.setenv(f"QUEUE_ENGINE_{name}", value)
    with pytest.raises(ConfigError, match=f"QUEUE_ENGINE_{name}"):
        OrchestratorSettings.from_env("", SCHEMA)
