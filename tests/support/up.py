"""The one way tests run ``queue-ctl up``: as a subprocess, its output in a file.

Used by tests/process/test_ctl_up.py (the supervisor's contract) and
tests/examples/test_example_fleets.py (the recipes' fleet files): start it,
find its worker children, wait for a condition (a bounded poll, never a fixed
sleep), read what it printed, and make sure nothing outlives the test.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

import psutil

from support.ctl import QUEUE_CTL, clean_env

T = TypeVar("T")


def start_up(
    *args: str, cwd: Path | None = None, **env: str
) -> tuple[subprocess.Popen[bytes], psutil.Process, IO[bytes]]:
    """Start ``queue-ctl up *args`` with a clean environment plus ``env``."""
    out_file = tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(
        [str(QUEUE_CTL), "up", *args],
        env=clean_env({"QUEUE_ENGINE_POLL_S": "0.2", **env}),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=out_file,
        stderr=subprocess.STDOUT,
    )
    return proc, psutil.Process(proc.pid), out_file


def workers(up: psutil.Process) -> set[int]:
    """The pids of ``up``'s worker children."""
    found = set()
    for child in up.children():
        try:
            if any("queue-claim-worker" in part for part in child.cmdline()):
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def wait(what: str, check: Callable[[], T], timeout: float = 60.0) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def read(out_file: IO[bytes]) -> str:
    """Everything ``up`` printed so far."""
    out_file.seek(0)
    return out_file.read().decode(errors="replace")


def alive(pids: set[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie is not running)."""
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def cleanup(proc: subprocess.Popen[bytes], up: psutil.Process, out_file: IO[bytes]) -> None:
    """For finally blocks: stop ``up`` if a test left it running; kill what does not stop.

    A graceful stop first (SIGINT, as Ctrl-C): an ``up`` with no DSN also stops
    its embedded Postgres, which is not its child (``pg_ctl`` detaches it) and
    which a kill of ``up``'s process tree would leave running.
    """
    if proc.poll() is None:
        children = up.children(recursive=True)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            for child in children:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
            proc.kill()
            proc.wait(10)
    out_file.close()
