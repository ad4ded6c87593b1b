"""The hard deadline with real processes: a worker frozen with the GIL held still ends.

A handler calls libc ``sleep`` through ``ctypes.PyDLL`` (the GIL stays held),
so every Python thread of its worker freezes, the job watchdog's included.
With a 2 s budget and a 1 s grace the faulthandler timer must end the process
(exit 1) within budget + grace (+ 2 s of slack for a loaded machine), after
writing every thread's stack, the handler's frame among them, to the log; the
orchestrator's fast recovery (the process's session ended) gives the job back
and the second worker runs attempt 2 to success.

The helpers (spawning ``liveness_app`` workers, reading jobs) are the ones of
the fast-recovery tests (``support.liveness``, ``support.jobs``).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.jobs import event_kinds, job, owner_pid
from support.liveness import idle_workers, spawn_worker
from support.orchestrators import WAIT_S, procs, role_of, spawn, wait_for

from queue_engine.worker.deadline import EXIT_HARD_DEADLINE

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here

BUDGET_S = 2
GRACE_S = 1
#: Slack on top of budget + grace for a loaded machine (the promise is budget + grace).
SLACK_S = 2
#: The exit within budget + grace + slack must not depend on another test process.
pytestmark = pytest.mark.serial
FAST = {
    "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
    "QUEUE_ENGINE_POLL_S": "0.2",
    "QUEUE_ENGINE_HARD_DEADLINE_GRACE_S": str(GRACE_S),
}


def enqueue_with_budget(conn: psycopg.Connection[Any], task: str, args: str, budget_s: int) -> int:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, args, max_attempts, timeout_s) "
        "VALUES ('liveness', %s, %s::jsonb, 3, %s) RETURNING id",
        (task, args, budget_s),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_worker_frozen_holding_the_gil_past_its_budget_exits_with_a_stack_dump(
    dsn: str, conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    orch = spawn(dsn, tmp_path / "orchestrator.log")
    procs.append(orch)
    wait_for("the orchestrator to lead", lambda: role_of(conn, orch.pid) == "leader", procs)
    logs = {i: tmp_path / f"worker{i}.log" for i in (1, 2)}
    workers = [spawn_worker(dsn, log_file=logs[i], **FAST) for i in (1, 2)]
    procs.extend(workers)
    wait_for("both workers idle", lambda: idle_workers(conn) == 2, procs)

    job_id = enqueue_with_budget(conn, "liveness.gil_hang_first", '{"sleep": 60}', BUDGET_S)
    frozen_pid = wait_for("the job to run", lambda: owner_pid(conn, job_id), procs)
    seen_running = time.monotonic()
    [frozen] = [w for w in workers if w.pid == frozen_pid]
    [survivor] = [w for w in workers if w is not frozen]
    procs.remove(frozen)  # its exit is expected: wait_for must not fail on it
    try:
        code = frozen.wait(timeout=BUDGET_S + GRACE_S + SLACK_S)
    except subprocess.TimeoutExpired:
        frozen.kill()
        frozen.wait(WAIT_S)
        pytest.fail(
            f"the frozen worker was still alive {BUDGET_S + GRACE_S + SLACK_S} s after its job "
            f"started (budget {BUDGET_S} s + grace {GRACE_S} s + {SLACK_S} s)"
        )
    elapsed = time.monotonic() - seen_running
    print(f"\nhard deadline: the frozen worker exited {code} {elapsed:.2f} s after its job ran")
    assert code == EXIT_HARD_DEADLINE == 1

    text = logs[1 if frozen is workers[0] else 2].read_text(errors="replace")
    assert "Timeout (0:00:0" in text, text  # faulthandler's header: budget + grace (~3 s)
    assert "in gil_hang_first" in text, text  # the handler's frame, named
    assert "watchdog.timeout" not in text  # the Python watchdog was frozen too

    wait_for("the job to succeed", lambda: job(conn, job_id)[0] == "succeeded", procs)
    status, attempt, result = job(conn, job_id)
    assert (status, attempt, result["pid"]) == ("succeeded", 2, survivor.pid)
    kinds = event_kinds(conn, job_id)
    assert "recovered" in kinds or "reaped" in kinds, kinds
