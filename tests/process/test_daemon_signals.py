"""A second SIGTERM ends a daemon that is still shutting down, with exit 130.

The orchestrator and the scheduler stop within a moment when the database
answers, so the test makes the first stop hang the way a real one can: it
holds a row lock on the daemon's own workers row, so its heartbeat and the
"mark stopped" update wait for the lock. The first SIGTERM starts the clean
stop (``<role>.stopping`` is logged, the process stays up); the second one
exits 130 at once, with ``<role>.exit_now`` in the log. Waits are bounded
polls; nothing is timed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.orchestrators import BIN, WAIT_S, count_in, procs, wait_for

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here

FAST = {
    "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
    "QUEUE_ENGINE_SWEEP_S": "0.2",
    "QUEUE_ENGINE_ELECT_S": "0.2",
    "QUEUE_ENGINE_RECONNECT_MAX_S": "1",
}


def spawn(command: str, dsn: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(BIN / command), "--dsn", dsn, "--log-level", "DEBUG"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **FAST},
        )


def registered(conn: psycopg.Connection[Any], role: str, pid: int) -> bool:
    row = conn.execute(
        "SELECT state FROM queue_engine.workers WHERE role = %s AND pid = %s",
        (role, pid),
    ).fetchone()
    return row is not None and row[0] not in ("starting", "stopped")


@pytest.mark.parametrize(
    ("command", "role"),
    [("queue-orchestrator", "orchestrator"), ("queue-scheduler", "scheduler")],
)
def test_a_second_sigterm_during_a_hanging_stop_exits_130(
    command: str, role: str, dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / f"{role}.log"
    proc = spawn(command, dsn, log)
    procs.append(proc)
    with psycopg.connect(dsn, autocommit=True) as conn:
        wait_for(f"the {role} to register", lambda: registered(conn, role, proc.pid), procs)
    with psycopg.connect(dsn) as locker:  # a transaction holding the daemon's row
        locker.execute(
            "SELECT 1 FROM queue_engine.workers WHERE role = %s AND pid = %s FOR UPDATE",
            (role, proc.pid),
        )
        proc.send_signal(signal.SIGTERM)
        wait_for(f"{role}.stopping", lambda: count_in(log, f"{role}.stopping") == 1, procs)
        assert proc.poll() is None, "the first SIGTERM's stop should still be waiting for the row"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT_S) == 130
        locker.rollback()
    assert count_in(log, f"{role}.exit_now signal=SIGTERM exit_code=130") == 1
    assert count_in(log, f"{role}.stopped") == 0  # it did not finish the clean stop
