"""Poison jobs with real processes: a job that kills its worker every time ends lost.

Two ``queue-claim-worker`` processes and a leading ``queue-orchestrator``
(fast recovery every 0.2 s) share a queue holding one job whose handler
segfaults (``ctypes.string_at(0)``) and ordinary jobs. The test plays the
supervisor (systemd's ``Restart=``): it restarts every worker that dies and
records how. Expected: each death spends an attempt, the poison job ends
``lost`` after its third, with an error that counts the deaths and names the
last one; ``queue-ctl show`` prints a ``died`` line; every other job succeeds
on its first attempt; and the workers died by SIGSEGV and were restarted in
between, so the fleet kept working instead of crash-looping for ever.

A handler that calls ``sys.exit`` ends its process too, but on the way out the
worker marks its row stopped, as after a clean stop: fast recovery still gives
the job back (a stopped worker that owns a running job did not stop cleanly),
so it too ends ``lost`` without waiting for the lease.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
import support.workers
from support.ctl import ok, queue_ctl
from support.orchestrators import procs, role_of, spawn, wait_for

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here

QUEUE = "poison"
#: Short cadences: a death is seen within about a second (session gone, then
#: the 1 s minimum heartbeat age of fast recovery), never through the lease.
FAST = {
    "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
    "QUEUE_ENGINE_LEASE_TTL_S": "30",
    "QUEUE_ENGINE_POLL_S": "0.2",
    "QUEUE_ENGINE_RECOVERY_S": "0.2",
}
NORMAL_JOBS = 8
DEADLINE_S = 60.0
#: ``spawn_worker(dsn, log_file=...)``: a ``poison_app`` worker appending to its log.
spawn_worker = partial(
    support.workers.spawn_worker, queue=QUEUE, app="poison_app", append=True, **FAST
)
idle_workers = partial(support.workers.idle_workers, queue=QUEUE)


def enqueue(conn: psycopg.Connection[Any], task: str, priority: int, max_attempts: int = 3) -> int:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, priority, max_attempts) "
        "VALUES (%s, %s, %s, %s) RETURNING id",
        (QUEUE, task, priority, max_attempts),
    ).fetchone()
    assert row is not None
    return int(row[0])


def statuses(conn: psycopg.Connection[Any], ids: list[int]) -> dict[int, tuple[str, int]]:
    rows = conn.execute(
        "SELECT id, status, attempt FROM queue_engine.jobs WHERE id = ANY(%s)", (ids,)
    ).fetchall()
    return {int(r[0]): (str(r[1]), int(r[2])) for r in rows}


def test_a_job_that_kills_its_worker_every_time_ends_lost_and_the_fleet_keeps_working(
    dsn: str, conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    orch = spawn(dsn, tmp_path / "orchestrator.log", **FAST)
    procs.append(orch)
    wait_for("the orchestrator to lead", lambda: role_of(conn, orch.pid) == "leader", procs)
    logs = [tmp_path / f"worker{i}.log" for i in (1, 2)]
    workers = [spawn_worker(dsn, log_file=log) for log in logs]
    procs.extend(workers)
    wait_for("both workers idle", lambda: idle_workers(conn) == 2, procs)
    first_pids = {w.pid for w in workers}

    # Priority 0: the poison job is claimed first, and again first after each death.
    poison = enqueue(conn, "poison.segfault", 0)
    normal = [enqueue(conn, "poison.ok", 100) for _ in range(NORMAL_JOBS)]
    ids = [poison, *normal]

    # The supervisor: restart a worker that exited, record how it exited.
    exits: list[int] = []
    started = time.monotonic()
    while True:
        now = statuses(conn, ids)
        done = now[poison][0] in ("lost", "failed") and all(
            now[j][0] == "succeeded" for j in normal
        )
        if done:
            break
        if time.monotonic() - started > DEADLINE_S:
            pytest.fail(f"not done after {DEADLINE_S:g} s: {now}, worker exits {exits}")
        if orch.poll() is not None:
            pytest.fail(f"the orchestrator exited with {orch.returncode}")
        for i, w in enumerate(workers):
            if w.poll() is not None:
                exits.append(w.returncode)
                workers[i] = spawn_worker(dsn, log_file=logs[i])
                procs.append(workers[i])
        time.sleep(0.05)
    took = time.monotonic() - started
    print(f"\npoison job lost after {took:.1f} s; worker exits {exits}")

    status, attempt = statuses(conn, [poison])[poison]
    assert (status, attempt) == ("lost", 3)
    assert all(statuses(conn, normal)[j] == ("succeeded", 1) for j in normal)
    # Three deaths by SIGSEGV, each followed by a restart (the loop above).
    assert exits.count(-signal.SIGSEGV) == 3, exits
    assert len(exits) == 3, exits

    row = conn.execute("SELECT error FROM queue_engine.jobs WHERE id = %s", (poison,)).fetchone()
    assert row is not None
    error = str(row[0])
    assert error.startswith(
        "the worker process died 3 times while running this job "
        "(its database session ended each time); last: worker "
    ), error
    assert "gone: its database session ended (backend pid " in error
    assert error.endswith("; attempts spent (3 of 3)"), error
    kinds = [
        str(r[0])
        for r in conn.execute(
            "SELECT kind FROM queue_engine.job_events WHERE job_id = %s ORDER BY id", (poison,)
        ).fetchall()
    ]
    assert kinds == ["claimed", "recovered"] * 2 + ["claimed", "lost"], kinds
    # Each attempt ran on a process of its own: three processes, at most two of
    # them the first ones, so a worker the test restarted ran the job.
    claimers = conn.execute(
        "SELECT w.pid FROM queue_engine.job_events e JOIN queue_engine.workers w "
        "ON w.id = e.worker_id WHERE e.job_id = %s AND e.kind = 'claimed' ORDER BY e.id",
        (poison,),
    ).fetchall()
    pids = [int(r[0]) for r in claimers]
    assert len(set(pids)) == 3 and set(pids) - first_pids, (pids, first_pids)

    shown = ok(queue_ctl("--dsn", dsn, "show", str(poison)))
    print(shown)
    assert "died: 3 times while running (database session ended 3 times" in shown, shown
    assert "error: the worker process died 3 times" in shown
    doc = json.loads(ok(queue_ctl("--dsn", dsn, "show", str(poison), "--json")))
    assert doc["deaths"] == {"count": 3, "session_ended": 3, "lease_expired": 0}


def test_a_handler_that_calls_sys_exit_fails_its_attempts_and_the_worker_lives(
    dsn: str, conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """sys.exit() in a handler is a failed attempt (retried, then failed), not a dead worker."""
    log = tmp_path / "worker.log"
    worker = spawn_worker(dsn, log_file=log)
    procs.append(worker)
    wait_for("the worker idle", lambda: idle_workers(conn) == 1, procs)
    job = enqueue(conn, "poison.sys_exit", 0, max_attempts=2)
    after = enqueue(conn, "poison.ok", 0)
    wait_for(
        "both jobs ended",
        lambda: statuses(conn, [job, after]) == {job: ("failed", 2), after: ("succeeded", 1)},
        procs,
    )
    assert worker.poll() is None  # the same process ran all three attempts
    row = conn.execute("SELECT error FROM queue_engine.jobs WHERE id = %s", (job,)).fetchone()
    assert row is not None and "SystemExit: 3" in str(row[0])
    kinds = [
        k
        for (k,) in conn.execute(
            "SELECT kind FROM queue_engine.job_events WHERE job_id = %s ORDER BY id", (job,)
        )
    ]
    assert "recovered" not in kinds and kinds.count("retry_scheduled") == 1
