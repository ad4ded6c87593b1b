"""A daemon started while the database is unreachable exits 69 at its connect deadline, not later.

``QUEUE_ENGINE_CONNECT_RETRY_S`` is how long start-up retries; the report saw a
worker configured for 10 s exit after 10.8-14.7 s, because the last backoff
step was slept whole past the deadline. The shared start-up wait
(``queue_engine/daemon/startup.py``) cuts that last wait at the deadline; this
holds every daemon to it: pointed at a closed port with a 3 s window, each
exits 69 within 3 s (+1 s) of its first failed attempt, and not before 3 s.

The window is measured from the first "unreachable" warning line (logged right
after the first failed attempt) to the exit, so interpreter start-up on a busy
machine is not counted against the daemon.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.ports import free_port as closed_port
from support.workers import worker_env

BIN = Path(sys.executable).parent
RETRY_S = 3.0
#: Allowed beyond the window, from the first failed attempt to the exit.
SLACK_S = 1.0
#: The exit within window + slack must not depend on another test process beside it.
pytestmark = pytest.mark.serial


COMMANDS = {
    "queue-claim-worker": (
        ["--queue=wt", "--app", "qe_worker_tasks"],
        "worker.waiting_for_database",
    ),
    "queue-orchestrator": ([], "orchestrator.waiting_for_database"),
    "queue-scheduler": ([], "scheduler.waiting_for_database"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_daemon_pointed_at_a_closed_port_exits_69_at_its_deadline(command: str) -> None:
    args, warning = COMMANDS[command]
    dsn = f"postgresql://u:pw@127.0.0.1:{closed_port()}/x"
    env = worker_env(QUEUE_ENGINE_CONNECT_RETRY_S=str(RETRY_S))
    env = {k: v for k, v in env.items() if not k.startswith("PG")}
    spawned = time.monotonic()
    proc = subprocess.Popen(
        [str(BIN / command), "--dsn", dsn, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append((time.monotonic(), raw.decode(errors="replace").rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=RETRY_S + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
    exited = time.monotonic()
    reader.join(5)
    first = next((at for at, line in lines if warning in line), None)
    text = "\n".join(line for _, line in lines)
    assert code == 69, text
    assert first is not None, f"no {warning} line:\n{text}"
    window = exited - first
    print(
        f"\n{command}: exit {code} {window:.2f} s after the first failed attempt "
        f"({exited - spawned:.2f} s after spawn; window {RETRY_S:g} s)"
    )
    assert window >= RETRY_S - 0.3, f"gave up before its window ({window:.2f} s)"
    assert window < RETRY_S + SLACK_S, f"exited {window:.2f} s after the first attempt"
    assert lines[-1][1].startswith(f"{command}: error: "), text
