"""The restart rule of a supervised daemon: pure, with the clock injected.

Given a child's exit code, whether a stop was asked for, and the time,
:class:`RestartPolicy` says: done, restart after a backoff, or give up. Exit
79 (recycle) is restarted at once and is not a crash; 0 after a stop request
is the normal end; 0 unasked (an operator's ``queue-ctl stop``) and 2 (a
usage or configuration error, a new process would fail the same way) are
not restarted, as the systemd units do not restart them; any other exit is a
crash, restarted after an exponential backoff counted from the crashes of
that child within a window, until ``give_up_after`` crashes in that window
(a crash loop) ends it.

Two supervisors follow it: ``queue-ctl up`` (:mod:`queue_engine.cli.supervisor`)
and the workers an application runs beside itself
(:mod:`queue_engine.producer.worker_processes`), so a worker that exits 75
is restarted alike under both, as systemd restarts it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from queue_engine.foundation.exit_codes import ExitCode


def describe_exit(code: int) -> str:
    """``exit 75 (WATCHDOG)``, ``killed by SIGKILL``, or ``exit 9`` for a code the engine never uses."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    try:
        return f"exit {code} ({ExitCode(code).name})"
    except ValueError:
        return f"exit {code}"


class Verdict(Enum):
    """What to do about a child that exited."""

    #: It ended as it should (asked to stop, or stopped cleanly): leave it.
    DONE = "done"
    #: Start it again after :attr:`Decision.delay_s`.
    RESTART = "restart"
    #: Do not start it again; the fleet cannot be what was asked for.
    GIVE_UP = "give_up"


@dataclass(frozen=True, slots=True)
class Decision:
    """The policy's answer for one exit, with the reason printed to the user."""

    verdict: Verdict
    reason: str
    delay_s: float = 0.0


@dataclass
class RestartPolicy:
    """Backoff per child, and a give-up after too many quick crashes (pure; clock injected)."""

    #: The first restart's delay; doubled for each further crash in the window.
    base_delay_s: float = 0.5
    #: The longest delay.
    max_delay_s: float = 30.0
    #: This many crashes of one child within ``window_s`` is a crash loop: give up.
    give_up_after: int = 5
    window_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _crashes: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def decide(self, name: str, code: int, stop_requested: bool) -> Decision:
        """What to do now that child ``name`` exited with ``code``."""
        how = describe_exit(code)
        if stop_requested:
            return Decision(Verdict.DONE, f"stopped: {how}")
        if code == ExitCode.RECYCLE:
            return Decision(Verdict.RESTART, f"recycled: {how}, starting a fresh process")
        if code == ExitCode.OK:
            return Decision(Verdict.DONE, f"stopped cleanly: {how}, not restarted")
        if code == ExitCode.USAGE:
            return Decision(
                Verdict.GIVE_UP, f"{how}: fix the command or the settings (not restarted)"
            )
        now = self.clock()
        recent = [t for t in self._crashes.get(name, []) if now - t < self.window_s]
        recent.append(now)
        self._crashes[name] = recent
        if len(recent) >= self.give_up_after:
            return Decision(
                Verdict.GIVE_UP,
                f"{how}: crashed {len(recent)} times in {self.window_s:g} s, giving up",
            )
        delay = min(self.max_delay_s, self.base_delay_s * 2 ** (len(recent) - 1))
        return Decision(Verdict.RESTART, f"crashed: {how}, restarting in {delay:g} s", delay)
