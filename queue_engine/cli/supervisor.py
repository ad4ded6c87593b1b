"""The supervisor of ``queue-ctl up``: run child daemons, restart the crashed, stop them all.

Two parts, so the rule can be tested without processes or waiting:

- :class:`~queue_engine.foundation.restarts.RestartPolicy` is the pure rule
  (done, restart after a backoff, or give up), in the foundation because the
  workers an application runs beside itself follow it too.
- :class:`Supervisor` runs the processes: each in its own session (a Ctrl-C
  in the terminal reaches only ``queue-ctl up``, which forwards it), its
  output read by a thread and printed line by line behind its name
  (``worker:email#1 | ...``, coloured on a terminal), its exit explained with
  the names of :class:`~queue_engine.foundation.exit_codes.ExitCode` or of the signal.
  The first SIGTERM/SIGINT is forwarded to every child as SIGTERM and their
  graceful stop is awaited (exit 0); a second one SIGKILLs them (exit 130).

This is a supervisor for development and small hosts; production runs the
systemd units (``docs/guides/local-development.md`` says when to use which).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import IO

import click

from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.restarts import (
    RestartPolicy,
    Verdict,
    describe_exit,
)

#: Seconds between two looks at the children.
TICK_S = 0.1
#: How long to wait for an exited child's last output lines.
PUMP_JOIN_S = 2.0
#: Colours of the name prefixes on a terminal, in turn.
COLOURS = ("cyan", "green", "yellow", "magenta", "blue", "bright_cyan", "bright_green")


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to start one child: its name (the output prefix), command line and environment."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    #: Restarted by ``--reload`` when the app's files change.
    reloadable: bool = False


@dataclass
class _Running:
    spec: ChildSpec
    process: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None
    reloading: bool = False
    given_up: bool = False
    pids: list[int] = field(default_factory=list)
    pump: threading.Thread | None = None


class Supervisor:
    """Start children, print their output, restart them by the policy, stop them on a signal."""

    def __init__(
        self,
        specs: Sequence[ChildSpec],
        policy: RestartPolicy | None = None,
        out: IO[str] | None = None,
        colour: bool | None = None,
        changed: Callable[[], bool] | None = None,
        watch: Callable[[Callable[[str], None], Sequence[int]], str | None] | None = None,
    ) -> None:
        self.out = out or sys.stdout
        self.colour = self.out.isatty() if colour is None else colour
        self.policy = policy or RestartPolicy()
        self.children = [_Running(spec) for spec in specs]
        #: ``--reload``: returns True when the app's files changed since the last call.
        self.changed = changed
        #: Asked every tick with a way to print behind ``up`` and the running children's
        #: pids: a reason the whole fleet must end (its database is gone), or None
        #: (see :mod:`queue_engine.cli.fleet_watch`).
        self.watch = watch
        self._lock = threading.Lock()
        self._signals = 0
        self._width = max((len(s.name) for s in specs), default=2)
        self._styles = {s.name: COLOURS[i % len(COLOURS)] for i, s in enumerate(specs)}
        self._styles["up"] = "white"

    # -- output ---------------------------------------------------------------

    def say(self, name: str, text: str) -> None:
        """Print one line behind ``name``'s prefix (whole lines only: one lock for all threads)."""
        prefix = f"{name:<{self._width}} |"
        if self.colour:
            prefix = click.style(prefix, fg=self._styles.get(name, "white"), bold=name == "up")
        with self._lock:
            self.out.write(f"{prefix} {text}\n")
            self.out.flush()

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.say(name, raw.decode(errors="replace").rstrip("\n"))
        stream.close()

    # -- processes ------------------------------------------------------------

    def _start(self, child: _Running) -> None:
        spec = child.spec
        process = subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(spec.env),
            start_new_session=True,
        )
        child.process, child.restart_at, child.reloading = process, None, False
        child.pids.append(process.pid)
        assert process.stdout is not None
        child.pump = threading.Thread(
            target=self._pump,
            args=(spec.name, process.stdout),
            name=f"pump-{spec.name}",
            daemon=True,
        )
        child.pump.start()
        self.say("up", f"started {spec.name} (pid {process.pid})")

    def _alive(self) -> list[_Running]:
        return [c for c in self.children if c.process is not None and c.process.poll() is None]

    def _signal_all(self, sig: signal.Signals) -> None:
        for child in self._alive():
            assert child.process is not None
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(sig)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1

    def _reap(self, child: _Running, stopping: bool) -> ExitCode | None:
        """Handle an exited child; an exit code for the whole fleet when it must end."""
        assert child.process is not None
        code = child.process.wait()
        child.process = None
        if child.pump is not None:
            # Its last lines (a traceback, say) before the line that explains the exit.
            child.pump.join(PUMP_JOIN_S)
        name = child.spec.name
        if child.reloading and not stopping:
            self.say("up", f"{name} {describe_exit(code)}: files changed, restarting")
            child.restart_at = time.monotonic()
            return None
        decision = self.policy.decide(name, code, stopping)
        self.say("up", f"{name} {decision.reason}")
        if decision.verdict is Verdict.RESTART:
            child.restart_at = time.monotonic() + decision.delay_s
        elif decision.verdict is Verdict.GIVE_UP:
            child.given_up = True
            if self.changed is not None and child.spec.reloadable:
                self.say("up", f"{name} waits for a change to the app's files (--reload)")
                return None
            return ExitCode.USAGE if code == ExitCode.USAGE else ExitCode.FAILURE
        return None

    def run(self) -> int:
        """Run until a signal (0; 130 after a second one), a child given up on (2 or 1), or the watch (69)."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        result: int = ExitCode.OK
        stopping = False
        try:
            for child in self.children:
                self._start(child)
            while True:
                if self._signals >= 2:
                    self.say("up", "second signal: killing every child")
                    self._signal_all(signal.SIGKILL)
                    for child in self._alive():
                        assert child.process is not None
                        child.process.wait()
                    return ExitCode.INTERRUPTED
                if self._signals == 1 and not stopping:
                    stopping = True
                    self.say("up", "stopping: SIGTERM to every child (again to kill them)")
                    self._signal_all(signal.SIGTERM)
                for child in self.children:
                    if child.process is not None and child.process.poll() is not None:
                        failed = self._reap(child, stopping)
                        if failed is not None and not stopping:
                            self.say("up", "stopping the other children")
                            result, stopping = failed, True
                            self._signal_all(signal.SIGTERM)
                if stopping:
                    if not self._alive():
                        self.say("up", "all children stopped")
                        return result
                else:
                    ended = self._check_watch()
                    if ended is not None:
                        result, stopping = ended, True
                    else:
                        self._restart_due()
                        self._check_reload()
                time.sleep(TICK_S)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _restart_due(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.process is None and child.restart_at is not None and now >= child.restart_at:
                self._start(child)

    def _check_watch(self) -> ExitCode | None:
        """Stop every child when the watch says the fleet cannot go on; its exit code then."""
        if self.watch is None:
            return None
        pids = [c.process.pid for c in self._alive() if c.process is not None]
        reason = self.watch(lambda text: self.say("up", text), pids)
        if reason is None:
            return None
        self.say("up", f"{reason}: stopping every child")
        self._signal_all(signal.SIGTERM)
        return ExitCode.UNAVAILABLE

    def _check_reload(self) -> None:
        if self.changed is None or not self.changed():
            return
        self.say("up", "app files changed: restarting the workers")
        for child in self.children:
            if not child.spec.reloadable:
                continue
            if child.process is not None:
                child.reloading = True
                child.process.send_signal(signal.SIGTERM)
            elif child.given_up or child.restart_at is not None:
                child.given_up = False
                child.restart_at = time.monotonic()
