"""One lifecycle for every background service: start, run periodically, stop.

The orchestrator's leader elector, heartbeat and reaper (and, later, the
scheduler's ticker) are all the same shape, so they share this base:

- :meth:`Service.start` spawns the loop thread and returns at once; calling it
  while the service runs does nothing.
- :meth:`Service.stop` asks the loop to end, interrupts its wait, and blocks
  until the thread has finished its current run; it is safe to call twice and
  before ``start`` (both do nothing), so shutdown code never needs to know how
  far start-up got.
- :meth:`Service.run_once` does one unit of work synchronously and returns a
  result object; the loop calls it, and tests call it directly instead of
  starting threads and waiting.
- The loop waits through ``wait(event, seconds)`` on a
  :class:`threading.Event`, so ``stop`` interrupts a long interval immediately.
  Every service is given its time as one :class:`Timing` object (``clock``,
  ``wait``, ``rand``), as River hands each maintenance service one archetype:
  a test passes one fake (``tests/support/timing.py``) instead of three
  keywords per service, and cannot leave one of the three real by mistake.
- The first run is staggered by a random fraction of ``stagger_s`` so that
  several services (or processes) started together do not hit the database in
  lock-step.
- A run that did work is logged at info, an idle run at debug: a quiet system
  has quiet logs. A run that raises is logged and retried after the service's
  ``error_backoff`` (:func:`queue_engine.daemon.outage.reconnect_backoff`: doubling
  from the interval, jittered, capped); the loop never dies of an exception.
- A service given an ``outage`` probe (:class:`queue_engine.daemon.outage.OutageProbe`)
  waits out that backoff through it while :meth:`Service.in_outage` says the
  last run could not reach the database: the wait ends within about a second
  of Postgres accepting connections again instead of after the whole backoff.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from queue_engine.daemon.outage import OutageProbe, ReconnectBackoff, reconnect_backoff
from queue_engine.foundation.logs import log_event

#: ``wait(event, seconds)``: block up to ``seconds`` or until the event is set.
Wait = Callable[[threading.Event, float], bool]
#: Monotonic seconds.
Clock = Callable[[], float]
#: A number in ``[0, 1)`` (jitter, stagger, spread).
Rand = Callable[[], float]

#: Default first-run stagger (seconds, upper bound of the random delay).
STAGGER_DEFAULT_S = 1.0
#: Cap of the backoff after consecutive failed runs.
ERROR_BACKOFF_MAX_S = 30.0
#: How long ``stop`` waits for the loop thread by default (None: as long as it takes).
STOP_TIMEOUT_DEFAULT_S: float | None = None


def event_wait(event: threading.Event, seconds: float) -> bool:
    """The production wait: sleep on the event, woken early by ``stop`` or ``trigger``."""
    return event.wait(max(0.0, seconds))


@dataclass(frozen=True, slots=True)
class Timing:
    """Where a service (or a daemon) takes its time from: clock, waits and random numbers.

    One object instead of three keywords on every constructor: every service
    (and the worker, its connection, the daemon runtime) defaults to the real
    one, and a test hands the parts it drives one fake. ``wait`` returns True
    when the event was set (a stop, a trigger), False when the time ran out.
    """

    clock: Clock = time.monotonic
    wait: Wait = event_wait
    rand: Rand = random.random


#: The real time: :func:`time.monotonic`, :func:`event_wait` and :func:`random.random`.
REAL_TIMING = Timing()


class ServiceResult(Protocol):
    """What :meth:`Service.run_once` returns: whether it did work, and fields to log."""

    @property
    def did_work(self) -> bool:
        """True when the run changed something worth an info log line."""
        ...

    def log_fields(self) -> dict[str, Any]:
        """The ``key=value`` fields describing the run."""
        ...


@dataclass(frozen=True, slots=True)
class IdleResult:
    """A run that has nothing to report (the default for simple services)."""

    did_work: bool = False

    def log_fields(self) -> dict[str, Any]:
        """No fields."""
        return {}


R = TypeVar("R", bound=ServiceResult)


class Service(ABC, Generic[R]):
    """A thread that calls :meth:`run_once` every ``interval_s`` until stopped."""

    #: Stable snake_case prefix of this service's log events (``<name>.run``, ``<name>.error``).
    name: str = "service"

    def __init__(
        self,
        *,
        interval_s: float,
        stagger_s: float = STAGGER_DEFAULT_S,
        timing: Timing = REAL_TIMING,
        logger: logging.Logger | None = None,
        error_backoff: ReconnectBackoff | None = None,
        outage: OutageProbe | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"{type(self).__name__}: interval_s must be > 0, got {interval_s!r}")
        self.interval_s = float(interval_s)
        self.stagger_s = max(0.0, min(float(stagger_s), self.interval_s))
        #: Clock, wait and random source of the loop and of the subclass's runs.
        self.timing = timing
        #: Delay after consecutive failed runs (default: from the interval up to
        #: :data:`ERROR_BACKOFF_MAX_S`, ±30 %, never beyond the cap).
        self.error_backoff = error_backoff or reconnect_backoff(
            self.interval_s, ERROR_BACKOFF_MAX_S
        )
        #: Ends a backoff wait early once the database is back (None: plain waits).
        self.outage = outage
        self.log = logger or logging.getLogger(f"queue_engine.{self.name}")
        self._lifecycle = threading.Lock()
        self._wakeup = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.consecutive_errors = 0
        self.runs = 0
        self.last_result: R | None = None
        #: Called with (name, result) after each successful run (metrics counters).
        self.on_result: Callable[[str, R], None] | None = None

    # -- lifecycle -------------------------------------------------------

    @property
    def running(self) -> bool:
        """True between ``start`` and the end of ``stop``."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Spawn the loop thread and return; does nothing if it is already running.

        If an earlier ``stop`` gave up waiting (its ``timeout``) and that loop is
        still finishing its last run, wait for it first: two loops of one
        service must never run at once, and a start must not be lost.
        """
        with self._lifecycle:
            old = self._thread
            if old is not None and old.is_alive():
                if not self._stopping:
                    return
                if old is threading.current_thread():
                    raise RuntimeError(f"{self.name}: start() called from its own stopping loop")
                old.join()
            self._stopping = False
            self._wakeup.clear()
            self._thread = threading.Thread(
                target=self._loop, name=f"queue-engine-{self.name}", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float | None = STOP_TIMEOUT_DEFAULT_S) -> None:
        """Ask the loop to end, interrupt its wait, and block until it has ended.

        Safe before ``start`` and when called twice. A run in progress is not
        interrupted: ``stop`` returns once it has completed (or after ``timeout``).
        """
        with self._lifecycle:
            thread = self._thread
            self._stopping = True
            self._wakeup.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._lifecycle:
            if self._thread is thread and (thread is None or not thread.is_alive()):
                self._thread = None

    def trigger(self) -> None:
        """Run again now instead of at the end of the current interval."""
        self._wakeup.set()

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called; long runs may check it to end early."""
        return self._stopping

    # -- what subclasses provide -----------------------------------------

    @abstractmethod
    def run_once(self) -> R:
        """Do one unit of work and describe it."""

    def next_interval(self, result: R | None) -> float:
        """Seconds from the start of one run to the start of the next (``result`` None: it raised)."""
        if result is None:
            return self.error_backoff.delay(self.consecutive_errors, self.timing.rand)
        return self.interval_s

    def in_outage(self, result: R | None) -> bool:
        """True when the wait after this run is a reconnect backoff (default: the run raised).

        Only consulted when the service has an ``outage`` probe; a service
        whose run reports a lost database in its result overrides it.
        """
        return result is None

    def on_stop(self) -> None:
        """Called on the loop thread after the last run (release connections here)."""

    # -- the loop --------------------------------------------------------

    def _sleep(self, seconds: float, *, outage: bool = False) -> None:
        """Wait ``seconds`` unless stopped or triggered (or, in an outage, the database is back)."""
        if not self._stopping:
            timing = self.timing
            if outage and self.outage is not None:
                self.outage.wait(self._wakeup, seconds, wait=timing.wait, clock=timing.clock)
            else:
                timing.wait(self._wakeup, seconds)
        if not self._stopping:
            self._wakeup.clear()

    def run_and_log(self) -> R | None:
        """One iteration of the loop: run, log the outcome, never raise."""
        clock = self.timing.clock
        started = clock()
        try:
            result = self.run_once()
        except Exception as exc:
            self.consecutive_errors += 1
            log_event(
                self.log,
                logging.WARNING,
                f"{self.name}.error",
                error=f"{type(exc).__name__}: {exc}",
                consecutive=self.consecutive_errors,
            )
            self.log.debug("%s run failed", self.name, exc_info=True)
            return None
        self.consecutive_errors = 0
        self.runs += 1
        self.last_result = result
        if self.on_result is not None:
            self.on_result(self.name, result)
        elapsed_ms = round((clock() - started) * 1000, 1)
        level = logging.INFO if result.did_work else logging.DEBUG
        log_event(self.log, level, f"{self.name}.run", **result.log_fields(), elapsed_ms=elapsed_ms)
        return result

    def _loop(self) -> None:
        clock = self.timing.clock
        try:
            self._sleep(self.timing.rand() * self.stagger_s)
            while not self._stopping:
                started = clock()
                result = self.run_and_log()
                if self._stopping:
                    break
                elapsed = clock() - started
                self._sleep(
                    max(0.0, self.next_interval(result) - elapsed),
                    outage=self.in_outage(result),
                )
        finally:
            try:
                self.on_stop()
            except Exception:
                self.log.exception("%s: error while stopping", self.name)
