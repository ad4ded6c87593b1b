"""Child daemons for ``queue-ctl demo`` and ``bench``: start, watch, stop in order.

``queue-ctl up`` takes its children's command lines from :func:`command_for` too.

The demo and the benchmark run the real console scripts (``queue-orchestrator``,
``queue-claim-worker``) as subprocesses, exactly as systemd would, rather than
threads in one process: that is what users will run, and it is the only way
the numbers and behaviours mean something. Each child:

- is found next to the running interpreter (the same virtualenv), with a
  ``python -c`` fallback when the console script is not installed;
- runs in its own session, so a Ctrl-C in the terminal reaches only the parent,
  which then stops the children in a deliberate order;
- logs to its own file, shown (tail) when something goes wrong;
- is stopped with SIGTERM, waited for, and SIGKILLed after a timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

#: Console script -> module with a ``main()``, for the fallback.
ENTRY_POINTS = {
    "queue-orchestrator": "queue_engine.cli.orchestrator",
    "queue-claim-worker": "queue_engine.cli.worker",
    "queue-scheduler": "queue_engine.cli.scheduler",
}
STOP_TIMEOUT_S = 15.0


def command_for(script: str) -> list[str]:
    """The argv prefix that runs ``script`` from this interpreter's environment."""
    candidate = Path(sys.executable).parent / script
    if candidate.exists():
        return [str(candidate)]
    return [sys.executable, "-c", f"from {ENTRY_POINTS[script]} import main; main()"]


@dataclass
class Child:
    """One started daemon and its log file."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def exited(self) -> int | None:
        """The exit code if it has exited, else None."""
        return self.process.poll()

    def tail(self, lines: int = 15) -> str:
        """The last lines of the child's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Fleet:
    """The children of one demo or benchmark run."""

    def __init__(self, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.log_dir = log_dir
        self.env = {**os.environ, **(env or {})}
        self.children: list[Child] = []

    def start(self, name: str, script: str, *args: str) -> Child:
        """Start ``script args`` as ``name`` with its output in ``<log_dir>/<name>.log``."""
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("wb")
        process = subprocess.Popen(
            [*command_for(script), *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )
        child = Child(name, process, log_path, log)
        self.children.append(child)
        return child

    def dead(self) -> list[Child]:
        """Children that exited (none should, until they are stopped)."""
        return [c for c in self.children if c.exited() is not None]

    def stop(self, names: list[str] | None = None, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM the chosen children (default: all, newest first), wait, SIGKILL stragglers."""
        chosen = [c for c in reversed(self.children) if names is None or c.name in names]
        for child in chosen:
            if child.exited() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        try:
            for child in chosen:
                try:
                    child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.process.kill()
                    child.process.wait()
        except KeyboardInterrupt:
            # A second Ctrl-C while waiting: no more patience, but no orphans either
            # (the children run in their own sessions, so nobody else would kill them).
            for child in chosen:
                if child.exited() is None:
                    child.process.kill()
                child.process.wait()
            raise
        finally:
            for child in chosen:
                if child._log is not None:
                    child._log.close()
                    child._log = None
