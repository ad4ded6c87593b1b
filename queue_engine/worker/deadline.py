"""The hard deadline: ends the worker process when no Python thread can run any more.

The job watchdog (:mod:`.watchdog`) is a Python thread. A handler stuck in a C
call that *holds the GIL* (``ctypes.PyDLL``, a regex with catastrophic
backtracking, a C extension busy-looping) freezes every Python thread, the
watchdog included, so the process would stay hung until the call returns
(forever, in general), holding its scale slot and its place in the fleet.

The hard deadline needs no GIL: it is :func:`faulthandler.dump_traceback_later`,
a timer on a C thread of its own. When it runs out it writes the stack of
every thread to stderr (the worker's log), headed ``Timeout (H:MM:SS)!``, and
calls ``_exit(1)``. It is armed for ``start + budget + grace`` when a job
starts, so it sits above the watchdog's own trip (at ``start + budget``, which
records the failure on the job, then exits 75/76/77): while the watchdog can
run, it always ends the process first and the hard deadline never fires.

The exit status is 1 (:data:`EXIT_HARD_DEADLINE`) because faulthandler's
``_exit(1)`` is hard-wired and nothing else in the process can run at that
moment to choose another one; a process outside could only kill it with a
signal. The ``Timeout (...)!`` dump just before it is what tells this exit
apart from the other causes of status 1.

Arming cost: each :func:`faulthandler.dump_traceback_later` starts a C thread
and each cancel joins one (about 50 µs for the pair on this project's 2-core
test machine, against roughly 300 µs of worker CPU for a whole no-op job), so
the timer is not re-armed on every job. A job that starts while the timer is
still armed from the previous job for a deadline at most ``tolerance_s``
earlier than its own keeps it (a stream of jobs with one budget re-arms about
twice a second, not per job: under 1 µs a job); the deadline is never later
than the job's own. When the job ends the timer is left running, and
the watchdog thread cancels it once no job has run for ``idle_cancel_s``
(an idle worker has no deadline). A timer left over for those moments can
only fire if the process is frozen for the rest of the old deadline.

Every decision is :func:`keeps`, a pure function, and :class:`HardDeadline`
takes its timer and clock injected, so tests drive it without waiting. The
timer is process-wide (faulthandler has one): a handler that calls
``faulthandler.dump_traceback_later`` itself replaces the worker's, which is
then missing until a job with another deadline re-arms it.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol, TextIO

from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.logs import log_event

log = logging.getLogger("queue_engine.worker.watchdog")

#: The exit status of a process ended by the hard deadline (faulthandler's ``_exit(1)``).
EXIT_HARD_DEADLINE = ExitCode.FAILURE
#: A job keeps a timer armed at most this much earlier than its own deadline.
REARM_TOLERANCE_S = 0.5
#: The watchdog thread cancels the timer once no job has run for this long.
IDLE_CANCEL_S = 0.5


class DumpTimer(Protocol):
    """A one-shot, process-wide timer that dumps every stack and exits when it runs out."""

    def arm(self, timeout_s: float) -> None:
        """(Re)start the timer: it runs out ``timeout_s`` seconds from now."""
        ...

    def cancel(self) -> None:
        """Stop the timer (nothing happens if it is not armed)."""
        ...


class FaultHandlerTimer:
    """The real timer: :func:`faulthandler.dump_traceback_later` with ``exit=True``."""

    def __init__(self, file: TextIO) -> None:
        """``file`` must have a file descriptor: the C thread writes to it without Python."""
        self.file = file

    def arm(self, timeout_s: float) -> None:
        """Dump every thread's stack to the file and ``_exit(1)`` in ``timeout_s`` seconds."""
        faulthandler.dump_traceback_later(timeout_s, exit=True, file=self.file)

    def cancel(self) -> None:
        """Cancel the pending dump (joins its C thread)."""
        faulthandler.cancel_dump_traceback_later()


def _usable(stream: TextIO | None) -> TextIO | None:
    """``stream`` if it has a file descriptor, else None."""
    if stream is None:
        return None
    try:
        stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None
    return stream


def process_timer() -> FaultHandlerTimer:
    """The timer of a worker process, writing to stderr (where the worker logs).

    Falls back to the process's original stderr, then to ``/dev/null`` (the
    process still ends; only the dump is lost) when stderr has no descriptor.
    """
    stream = _usable(sys.stderr) or _usable(sys.__stderr__) or open(os.devnull, "w")  # noqa: SIM115
    return FaultHandlerTimer(stream)


def keeps(armed_for: float | None, wanted: float, tolerance_s: float) -> bool:
    """True when a timer armed for ``armed_for`` may stand for a deadline of ``wanted``.

    It may run out a little early (at most ``tolerance_s``: the grace absorbs
    it), never late: the promise is "within budget + grace".
    """
    return armed_for is not None and wanted - tolerance_s <= armed_for <= wanted


def tolerance_for(grace_s: float) -> float:
    """How early a kept timer may run out: :data:`REARM_TOLERANCE_S`, at most a quarter of the grace."""
    return min(REARM_TOLERANCE_S, grace_s / 4)


class HardDeadline:
    """Arms the process-wide dump timer around jobs; ``job_started`` / ``job_ended`` / ``idle_tick``.

    The main thread calls the first two (through the watchdog's ``arm`` and
    ``disarm``), the watchdog thread calls :meth:`idle_tick` on each of its
    looks while no job is armed. A lock keeps the two threads' decisions apart.
    """

    def __init__(
        self,
        grace_s: float,
        timer: DumpTimer,
        *,
        clock: Callable[[], float] = time.monotonic,
        idle_cancel_s: float = IDLE_CANCEL_S,
    ) -> None:
        """``clock`` must be the clock the watchdog stamps job starts with."""
        self.grace_s = grace_s
        self.timer = timer
        self.clock = clock
        self.tolerance_s = tolerance_for(grace_s)
        self.idle_cancel_s = idle_cancel_s
        self._lock = threading.Lock()
        self._running = False
        self._ended_at = clock()
        #: Set when the timer could not be armed: jobs then run without it.
        self.off = False
        #: The clock reading the armed timer runs out at; None when not armed.
        self.armed_for: float | None = None
        #: How many times the timer was (re)armed: a stream of jobs keeps this low.
        self.arms = 0

    def deadline_for(self, started: float, budget_s: float) -> float:
        """When a job that started at ``started`` with ``budget_s`` ends the process at the latest."""
        return started + budget_s + self.grace_s

    def job_started(self, started: float, budget_s: float) -> None:
        """A job started at ``started`` (watchdog clock): its deadline is budget + grace away."""
        wanted = self.deadline_for(started, budget_s)
        with self._lock:
            self._running = True
            if self.off or keeps(self.armed_for, wanted, self.tolerance_s):
                return
            try:
                # Rounded to the millisecond: the dump's header then reads ``Timeout (0:00:12)!``.
                self.timer.arm(max(round(wanted - self.clock(), 3), 0.001))
            except Exception as exc:  # a job must never fail for want of the deadline
                self.off = True
                log_event(
                    log,
                    logging.ERROR,
                    "watchdog.hard_deadline_off",
                    error=f"{type(exc).__name__}: {exc}",
                    reason="jobs run without the hard deadline; the watchdog thread still works",
                )
                return
            self.armed_for = wanted
            self.arms += 1

    def job_ended(self) -> None:
        """The job ended; the timer stays armed for a job that follows at once."""
        with self._lock:
            self._running = False
            self._ended_at = self.clock()

    def idle_tick(self) -> None:
        """No job is armed: cancel the timer once none has run for ``idle_cancel_s``."""
        with self._lock:
            if (
                not self._running
                and self.armed_for is not None
                and self.clock() - self._ended_at >= self.idle_cancel_s
            ):
                self.timer.cancel()
                self.armed_for = None

    def close(self) -> None:
        """Cancel the timer (the worker stops); safe twice."""
        with self._lock:
            self._running = False
            if self.armed_for is not None:
                self.timer.cancel()
                self.armed_for = None
