"""The job watchdog: a thread that ends a job the handler cannot or will not end.

The worker runs one handler at a time on its main thread. Whatever that
handler does, something must be able to stop it: a budget overrun, a handler
that stopped reporting progress, a cancel it ignores, a lease it lost, or a
SIGTERM whose grace ran out. Python cannot interrupt a thread stuck in
``time.sleep``, in a C call, or in a loop that never looks at a flag, so the
only reliable stop is the process's end: the watchdog records why on the job
(a short-lived connection of its own with a ``statement_timeout``, so a stuck
worker connection cannot block it) and calls ``os._exit`` with a documented
code; systemd (the worker unit's ``Restart=on-failure``) starts a fresh process.

============  =====  ==============================================================
trip          exit   what is written
============  =====  ==============================================================
``zombie``    77     nothing: the job is no longer ours (reaped, recovered, re-claimed)
``cancel``    77     ``canceled`` (the handler ignored a cancel for the grace period)
``timeout``   75     a failure "watchdog: exceeded Ns budget" (retry or fail per attempts)
``stall``     76     a failure "watchdog: no progress for Ns" (opt-in per task)
``give_back`` 0      ``queued``, attempt refunded (SIGTERM grace ran out, or
                     ``queue-ctl stop --now``: no grace at all)
============  =====  ==============================================================

What it cannot do: a C call that *holds the GIL* (``ctypes.PyDLL``, some
extensions) freezes every Python thread, this one included. For that case
:meth:`JobWatchdog.arm` also arms the hard deadline (:mod:`.deadline`, a
faulthandler timer on a C thread) for budget + grace: it dumps every thread's
stack and exits 1. It sits above this thread's own trip, so while this thread
can run it always trips first and writes the job's failure. The job of a
process ended that way is given back by the orchestrator (fast recovery: its
session ended; or the lease), and systemd's ``WatchdogSec`` still applies
(no ``WATCHDOG=1`` ping arrives while every thread is frozen).

Arming costs nothing per job beyond a few attribute writes in this process
(and a re-arm of the hard deadline's timer when the budget changes, at most
about twice a second in a stream of jobs): no statement, no round trip. Decisions are a pure function of the armed
state and the time (:func:`decide`); the thread's clock, sleep, exit and
recorder are injected, so tests drive it with a virtual clock and never wait.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from queue_engine.foundation import settings as table
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.logs import log_event
from queue_engine.worker.deadline import HardDeadline

log = logging.getLogger("queue_engine.worker.watchdog")

#: Exit code after the wall-clock budget of a job ran out.
EXIT_WATCHDOG = ExitCode.WATCHDOG
#: Exit code after a job that reports progress stopped reporting it.
EXIT_STALL = ExitCode.STALL
#: Exit code after a hard stop: a cancel ignored for the grace period, or a zombie.
EXIT_HARD_STOP = ExitCode.HARD_STOP
#: Exit code after the SIGTERM grace ran out and the job was given back.
EXIT_GIVEN_BACK = ExitCode.OK

#: Budget of a job when neither the job nor its task sets ``timeout_s``.
DEFAULT_TIMEOUT_S = table.DEFAULT_TIMEOUT_S.default
#: A suggested stall timeout; the stall watchdog runs only for tasks that set one.
STALL_TIMEOUT_DEFAULT_S = 120.0
#: How long a handler may ignore a cancel before the worker hard-stops.
CANCEL_GRACE_DEFAULT_S = table.CANCEL_GRACE_S.default
#: How long a zombie (lease lost) may run on before the worker hard-stops.
ZOMBIE_GRACE_DEFAULT_S = table.ZOMBIE_GRACE_S.default
#: How long SIGTERM waits for the running job before giving it back.
SHUTDOWN_GRACE_DEFAULT_S = table.SHUTDOWN_GRACE_S.default
#: How often the thread looks (the precision of every deadline).
TICK_S = 0.1
#: How long :meth:`JobWatchdog.stop` waits for the thread by default.
STOP_TIMEOUT_S = 5.0


@dataclass(slots=True)
class ArmedJob:
    """The running job as the watchdog sees it; one object per execution.

    The heartbeat thread and the signal handler write ``cancel_at``,
    ``lost_at`` and ``last_beat`` without a lock: each is one attribute store
    (atomic under the GIL), and a note that lands on an execution that has
    just ended changes an object nobody looks at any more.
    """

    job_id: int
    attempt: int
    started: float
    budget_s: float
    stall_s: float | None = None
    last_beat: float | None = None
    cancel_at: float | None = None
    lost_at: float | None = None


@dataclass(frozen=True, slots=True)
class Trip:
    """Why the watchdog ends the process, and with which exit code."""

    kind: str
    exit_code: int
    message: str


@dataclass(frozen=True, slots=True)
class Graces:
    """The grace periods :func:`decide` applies."""

    cancel_s: float = CANCEL_GRACE_DEFAULT_S
    zombie_s: float = ZOMBIE_GRACE_DEFAULT_S
    shutdown_s: float = SHUTDOWN_GRACE_DEFAULT_S


def job_budget_s(
    job_timeout_s: float | None, task_timeout_s: float | None, default_s: float
) -> float:
    """The wall-clock budget of a job: the job's ``timeout_s``, else the task's, else the default."""
    for value in (job_timeout_s, task_timeout_s):
        if value is not None and value > 0:
            return float(value)
    return float(default_s)


def stall_timeout_s(task_value: object) -> float | None:
    """The stall timeout of a task: its ``stall_timeout_s``; None (off) when unset.

    ``True`` (for definitions built by hand) means the suggested default.
    """
    if task_value is None or task_value is False:
        return None
    if task_value is True:
        return STALL_TIMEOUT_DEFAULT_S
    if isinstance(task_value, int | float) and task_value > 0:
        return float(task_value)
    return None


def _fmt(seconds: float) -> str:
    return f"{seconds:g}"


def decide(
    armed: ArmedJob,
    now: float,
    graces: Graces,
    stop_at: float | None,
    stop_now_at: float | None = None,
) -> Trip | None:
    """The trip due for ``armed`` at ``now``, if any (pure: the whole policy is here).

    Order matters when several are due: a zombie's outcome must never be
    written, so it comes first; then an ignored cancel (the user asked for
    ``canceled``), the budget, a stall, and last the give-back: at once after
    an operator's hard stop (``stop_now_at``), else once the SIGTERM grace ran out.
    """
    if armed.lost_at is not None and now - armed.lost_at >= graces.zombie_s:
        return Trip(
            "zombie",
            EXIT_HARD_STOP,
            f"watchdog: job {armed.job_id} is no longer this worker's (lease lost) and did not "
            f"stop within {_fmt(graces.zombie_s)}s; hard stop, its outcome is not written",
        )
    if armed.cancel_at is not None and now - armed.cancel_at >= graces.cancel_s:
        return Trip(
            "cancel",
            EXIT_HARD_STOP,
            f"watchdog: canceled; the handler ignored the cancel for {_fmt(graces.cancel_s)}s "
            "and the worker was hard-stopped",
        )
    if now - armed.started >= armed.budget_s:
        return Trip("timeout", EXIT_WATCHDOG, f"watchdog: exceeded {_fmt(armed.budget_s)}s budget")
    if (
        armed.stall_s is not None
        and armed.last_beat is not None
        and now - armed.last_beat >= armed.stall_s
    ):
        return Trip(
            "stall",
            EXIT_STALL,
            f"watchdog: stalled, no progress beat for {_fmt(armed.stall_s)}s "
            f"(stall_timeout_s={_fmt(armed.stall_s)})",
        )
    if stop_now_at is not None:
        return Trip(
            "give_back",
            EXIT_GIVEN_BACK,
            "worker stopped at once (queue-ctl stop --now): the job was given back "
            "(attempt not counted)",
        )
    if stop_at is not None and now - stop_at >= graces.shutdown_s:
        return Trip(
            "give_back",
            EXIT_GIVEN_BACK,
            f"worker stopping: the job did not finish within the {_fmt(graces.shutdown_s)}s "
            "shutdown grace and was given back (attempt not counted)",
        )
    return None


#: ``recorder(armed, trip)``: write what the trip says on the job (and tidy up).
Recorder = Callable[[ArmedJob, Trip], None]


def _flush_logs() -> None:
    # os._exit skips interpreter shutdown: push out what the handlers buffered.
    for handler in logging.getLogger().handlers:
        # A broken log handler must not keep the process alive.
        with contextlib.suppress(Exception):
            handler.flush()


class JobWatchdog:
    """The watchdog thread: ``start()``, then ``arm()`` / ``disarm()`` around every job.

    ``exit`` defaults to :func:`os._exit`, the only exit that works while the
    main thread is stuck; it is injected (with ``clock``, ``sleep`` and
    ``recorder``) so :meth:`run_once` is tested with a virtual clock.
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        graces: Graces | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        exit: Callable[[int], object] = os._exit,
        tick_s: float = TICK_S,
        hard_deadline: HardDeadline | None = None,
    ) -> None:
        """``hard_deadline`` (armed and disarmed with every job) must use ``clock`` too."""
        self.recorder = recorder
        self.hard_deadline = hard_deadline
        self.graces = graces or Graces()
        self.clock = clock
        self.sleep = sleep
        self.exit = exit
        self.tick_s = tick_s
        # Held by the main thread to arm/disarm and by the watchdog thread while it
        # trips: a job that ends while a trip is being recorded blocks its disarm
        # until the process exits, so the main loop never writes a second outcome.
        self._lock = threading.Lock()
        self._armed: ArmedJob | None = None
        self._stop_at: float | None = None
        self._stop_now_at: float | None = None
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        #: The clock at the thread's last look (the worker's systemd liveness check).
        self.last_tick: float = clock()
        self.tripped: Trip | None = None

    # -- what the main loop calls ------------------------------------------

    def arm(
        self, job_id: int, attempt: int, *, budget_s: float, stall_s: float | None = None
    ) -> ArmedJob:
        """Start watching one execution; its budget runs from now."""
        armed = ArmedJob(job_id, attempt, self.clock(), budget_s, stall_s)
        with self._lock:
            self._armed = armed
        if self.hard_deadline is not None:
            self.hard_deadline.job_started(armed.started, budget_s)
        return armed

    def disarm(self) -> None:
        """The execution ended; blocks (until the process exits) if a trip is under way.

        The hard deadline stays armed while a trip is recorded: a recording
        that hangs past it still ends the process.
        """
        with self._lock:
            self._armed = None
        if self.hard_deadline is not None:
            self.hard_deadline.job_ended()

    @property
    def armed(self) -> ArmedJob | None:
        """The execution being watched, if any."""
        return self._armed

    # -- notes from other threads (never block: the signal handler calls one) --

    def beat(self) -> None:
        """A progress beat of the running handler (a yield, ``ctx.beat()``, ``ctx.progress()``)."""
        armed = self._armed
        if armed is not None:
            armed.last_beat = self.clock()

    def note_cancel(self, job_id: int) -> None:
        """A cancel of ``job_id`` was seen: its grace starts now (if it is the running job)."""
        armed = self._armed
        if armed is not None and armed.job_id == job_id and armed.cancel_at is None:
            armed.cancel_at = self.clock()

    def note_lost(self, job_id: int, attempt: int | None = None) -> None:
        """``job_id`` (at ``attempt``) is no longer ours: the running execution is a zombie."""
        armed = self._armed
        if (
            armed is not None
            and armed.job_id == job_id
            and (attempt is None or armed.attempt == attempt)
            and armed.lost_at is None
        ):
            armed.lost_at = self.clock()

    def note_stop(self) -> None:
        """SIGTERM: the shutdown grace of the running job (and of any job started later) begins."""
        if self._stop_at is None:
            self._stop_at = self.clock()

    def note_stop_now(self) -> None:
        """An operator's hard stop: the running job (and any started later) is given back now."""
        if self._stop_now_at is None:
            self._stop_now_at = self.clock()

    # -- the thread ------------------------------------------------------------

    def run_once(self) -> Trip | None:
        """Look once; on a trip: log, record, exit. Returns the trip (when ``exit`` returns)."""
        self.last_tick = now = self.clock()
        armed = self._armed
        if armed is None and self.hard_deadline is not None:
            self.hard_deadline.idle_tick()  # no job: the hard deadline is cancelled when idle
        if armed is None or self.tripped is not None:  # one trip per process
            return None
        trip = decide(armed, now, self.graces, self._stop_at, self._stop_now_at)
        if trip is None:
            return None
        with self._lock:
            if self._armed is not armed:  # the job ended meanwhile: nothing to do
                return None
            self.tripped = trip
            level = logging.INFO if trip.kind == "give_back" else logging.ERROR
            log_event(
                log,
                level,
                f"watchdog.{trip.kind}",
                job_id=armed.job_id,
                attempt=armed.attempt,
                exit_code=trip.exit_code,
                elapsed_s=round(now - armed.started, 3),
                reason=trip.message,
            )
            try:
                self.recorder(armed, trip)
            except Exception as exc:  # the exit must happen whatever the database says
                log_event(
                    log,
                    logging.ERROR,
                    "watchdog.record_failed",
                    job_id=armed.job_id,
                    error=f"{type(exc).__name__}: {exc}",
                    reason="the lease or the orchestrator's fast recovery will recover the job",
                )
            _flush_logs()
            self.exit(trip.exit_code)
        return trip

    def start(self) -> None:
        """Spawn the watchdog thread (a daemon thread: it never keeps the process alive)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._closed.clear()
        self._thread = threading.Thread(
            target=self._loop, name="queue-engine-watchdog", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = STOP_TIMEOUT_S) -> None:
        """End the thread and cancel the hard deadline; safe twice and before ``start``."""
        self._closed.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None
        if self.hard_deadline is not None:
            self.hard_deadline.close()

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                self.run_once()
            except Exception:  # never let the watchdog die of a bug in logging
                log.exception("watchdog tick failed")
            self.sleep(self.tick_s)
