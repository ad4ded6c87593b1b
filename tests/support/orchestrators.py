"""Helpers for the daemon process tests: spawn, poll with a bound, read logs.

The ``procs`` fixture (whatever a test started is killed at its end) and
:func:`wait_for` serve every daemon's tests; :func:`spawn` starts
``queue-orchestrator`` with fast cadences.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

BIN = Path(sys.executable).parent
WAIT_S = 30.0


def spawn(dsn: str, log: Path, *, log_level: str = "DEBUG", **env: str) -> subprocess.Popen[bytes]:
    """Start ``queue-orchestrator`` with fast cadences, logging to ``log`` at ``log_level``."""
    full_env = {
        **os.environ,
        "QUEUE_ENGINE_SWEEP_S": "0.2",
        "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
        "QUEUE_ENGINE_ELECT_S": "0.2",
        "QUEUE_ENGINE_RECONNECT_MAX_S": "1",
        **env,
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(BIN / "queue-orchestrator"), "--dsn", dsn, "--log-level", log_level],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )


def wait_for(
    what: str,
    predicate: Callable[[], Any],
    procs: list[subprocess.Popen[bytes]],
    *,
    killed_ok: bool = False,
) -> Any:
    """Poll ``predicate`` until truthy; fail (with the reason) after WAIT_S or if a process died.

    ``killed_ok``: a process the test killed with SIGKILL is no failure (the
    test of a kill -9 keeps waiting on the survivors).
    """
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for p in procs:
            if p.poll() is not None and not (killed_ok and p.returncode == -signal.SIGKILL):
                pytest.fail(f"process {p.pid} exited with {p.returncode} while waiting for {what}")
        time.sleep(0.05)
    pytest.fail(f"timed out after {WAIT_S:g}s waiting for {what}")


def count_in(log: Path, event: str) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines() if event in line)


def role_of(conn: psycopg.Connection[Any], pid: int) -> str | None:
    row = conn.execute(
        "SELECT state FROM queue_engine.workers WHERE role = 'orchestrator' AND pid = %s "
        "ORDER BY started_at DESC LIMIT 1",
        (pid,),
    ).fetchone()
    return None if row is None else str(row[0])


def stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM and wait for the exit code."""
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=WAIT_S)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started by a test; whatever still runs at the end is killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)
