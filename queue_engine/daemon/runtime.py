"""The daemon runtime: one lifecycle for every long-running process of the engine.

A daemon module says *which* services it runs; this module runs them the
same way for every role (:data:`DAEMON_ROLES`: the orchestrator, the
scheduler and the claim worker):

1. **Signals** (:mod:`.signals`): the first SIGTERM/SIGINT asks for a
   graceful stop, a second one exits 130 at once. :meth:`DaemonRuntime.main`
   installs them (a console script, on the main thread); :meth:`DaemonRuntime.run`
   is the same life without them, for a daemon run inside another program
   (a test, the testing kit's drain), stopped with :meth:`DaemonRuntime.request_stop`.
2. **Prepare**: the daemon's own start-up work (the orchestrator migrates,
   the scheduler waits for its schema and syncs code schedules, the worker
   waits for its schema), with :meth:`DaemonRuntime.wait_for_database` (one
   backoff, one deadline, exit 69 after ``QUEUE_ENGINE_CONNECT_RETRY_S``) and
   an interruptible :meth:`DaemonRuntime.sleep`. A stop during this phase
   exits 0.
3. **Start**: the heartbeat registers the process synchronously (a database
   that cannot be written fails the start; the worker's target retries its
   connection until it works or a stop is asked for), then its loop and the
   daemon's services start in order. If one fails to start, those already
   started are stopped in reverse and the error propagates.
4. **Run**: ``READY=1`` with the status line, then the main thread runs the
   daemon's *foreground* if it has one (the worker's claim loop), until it
   returns the exit code; a daemon without one only waits for the stop event
   there and sends ``STATUS=`` when the status line changes (with a
   foreground, the heartbeat's ticks send it). At every tick the heartbeat
   pings the systemd watchdog when a ping is due and the daemon's ``healthy``
   callback says so (:mod:`.notify` holds the ping interval).
5. **Stop**: ``STOPPING=1``, the services in reverse order, the heartbeat
   last, then the row is marked stopped. Stop is safe twice and before
   start, and every wait is bounded (``stop_timeout_s`` per service; their
   threads are daemons, so a hung one cannot keep the process alive).

The workers-row state is the runtime's phase (``starting``, ``stopping``)
around the daemon's own state while running (``leader``/``standby``,
``running``); the worker's target writes its own (``idle``, ``busy``,
``parked``, ``stopping``). Exit code: what the foreground returned (the
worker's 79 after a recycling limit), else 0; errors propagate to the console
script, which maps them (69, 2, 3...). The worker came to this runtime last
(it had its own start, stop, heartbeat and systemd path): one lifecycle means
a fix to signals, start-up or systemd is made once, for every daemon.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from queue_engine.daemon.heartbeat import HEARTBEAT_DEFAULT_S, BeatTarget, Heartbeat, WorkersRow
from queue_engine.daemon.identity import process_id
from queue_engine.daemon.notify import SystemdLink
from queue_engine.daemon.service import REAL_TIMING, Timing
from queue_engine.daemon.signals import StopSignals
from queue_engine.daemon.startup import StopRequested, wait_for_database
from queue_engine.daemon.systemd import SystemdNotifier
from queue_engine.foundation import settings as table
from queue_engine.foundation.errors import DatabaseUnavailable
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.logs import log_event

T = TypeVar("T")

#: The roles that run on this runtime (their ``<role>.started`` ... events are catalogued).
DAEMON_ROLES = ("orchestrator", "scheduler", "worker")
#: How long a clean stop waits for each service's current run.
STOP_TIMEOUT_S = 10.0
#: How often the main thread re-reads the status line for ``STATUS=``.
STATUS_POLL_S = 0.5
#: Default of ``QUEUE_ENGINE_CONNECT_RETRY_S``: how long start-up retries an unreachable database.
CONNECT_RETRY_DEFAULT_S = table.CONNECT_RETRY_S.default

log = logging.getLogger("queue_engine.daemon")


class Component(Protocol):
    """What the runtime starts and stops: a :class:`~queue_engine.daemon.service.Service`, or an adapter."""

    def start(self) -> None:
        """Start; return at once."""
        ...

    def stop(self, timeout: float | None = ...) -> None:
        """Stop within ``timeout``; safe twice and before ``start``."""
        ...


class Hooks:
    """A component made of two functions: one-off work at start, or at stop.

    The worker publishes its tasks' defaults at start, and at stop gives back
    the jobs it holds and flushes their outcomes: work a daemon does once, in
    the runtime's start order and reverse stop order, with no thread of its own.
    """

    def __init__(
        self,
        *,
        start: Callable[[], object] | None = None,
        stop: Callable[[], object] | None = None,
    ) -> None:
        self._start = start
        self._stop = stop

    def start(self) -> None:
        """Run the start function, if any."""
        if self._start is not None:
            self._start()

    def stop(self, timeout: float | None = None) -> None:
        """Run the stop function, if any (it bounds its own waits)."""
        if self._stop is not None:
            self._stop()


def _always() -> bool:
    return True


def _running() -> str:
    return "running"


class DaemonRuntime:
    """Signals, wait-for-database, heartbeat, ordered start and reverse stop, systemd."""

    def __init__(
        self,
        role: str,
        *,
        dsn: str,
        schema: str,
        status: Callable[[], str],
        state: Callable[[], str] = _running,
        heartbeat_s: float = HEARTBEAT_DEFAULT_S,
        connect_retry_s: float = CONNECT_RETRY_DEFAULT_S,
        telemetry: Callable[[], dict[str, Any]] = dict,
        healthy: Callable[[], bool] = _always,
        started_fields: Callable[[], dict[str, Any]] = dict,
        stopped_fields: Callable[[], dict[str, Any]] = dict,
        id_field: str = "id",
        stopping_status: str = "stopping",
        worker_id: str | None = None,
        beat_target: BeatTarget | None = None,
        on_stop: Callable[[], None] | None = None,
        stop_event: threading.Event | None = None,
        notifier: SystemdNotifier | None = None,
        environ: dict[str, str] | None = None,
        exit: Callable[[int], object] = os._exit,
        stop_timeout_s: float = STOP_TIMEOUT_S,
        status_poll_s: float = STATUS_POLL_S,
        timing: Timing = REAL_TIMING,
    ) -> None:
        """``state`` is the row state while running; ``status`` the ``systemctl status`` line.

        ``healthy`` gates the watchdog pings (False: a loop that matters has
        stopped, let systemd restart us). ``beat_target`` replaces the default
        workers-row write (the worker's beat also renews its leases).
        ``on_stop`` runs once, at the first stop request (a signal, or
        :meth:`request_stop`), after ``stop_event`` (the runtime's own when
        None) is set. The ``<role>.started`` and ``.stopped`` lines carry the
        process id as ``id_field``, then ``started_fields()`` or
        ``stopped_fields()``.
        """
        self.role = role
        self.id = worker_id or process_id(role)
        self.connect_retry_s = connect_retry_s
        self.daemon_state = state
        self.status_line = status
        self.healthy = healthy
        self.started_fields = started_fields
        self.stopped_fields = stopped_fields
        self.id_field = id_field
        self.stopping_status = stopping_status
        self.stop_timeout_s = stop_timeout_s
        self.status_poll_s = status_poll_s
        self.timing = timing
        self.log = logging.getLogger(f"queue_engine.{role}")
        self.systemd = SystemdLink(notifier, environ=environ, clock=timing.clock)
        self.signals = StopSignals(
            role, on_first=on_stop, exit=exit, logger=self.log, event=stop_event
        )
        target = beat_target or WorkersRow(
            dsn, schema, worker_id=self.id, role=role, state=self.row_state, telemetry=telemetry
        )
        # Under a systemd watchdog the heartbeat ticks at least once per ping interval,
        # also while its database writes fail (the retry delay is capped to it).
        self.heartbeat = Heartbeat(
            target,
            interval_s=heartbeat_s,
            on_tick=self._on_tick,
            max_tick_s=self.systemd.ping_interval_s,
            timing=timing,
        )
        #: The daemon's services, started in this order after the heartbeat, stopped in reverse.
        self.services: list[Component] = []
        self._lifecycle = threading.Lock()
        self._phase = "starting"
        self._running: list[Component] = []
        self._started = False
        self._in_foreground = False

    # -- state -----------------------------------------------------------

    @property
    def phase(self) -> str:
        """``starting``, ``running`` or ``stopping``."""
        return self._phase

    def row_state(self) -> str:
        """The state written to the workers row: the phase, or the daemon's state while running."""
        phase = self._phase
        return self.daemon_state() if phase == "running" else phase

    @property
    def stop_requested(self) -> bool:
        """True once a signal (or :meth:`request_stop`) asked for a stop."""
        return self.signals.stop_requested

    def request_stop(self) -> None:
        """Ask :meth:`run` to stop, as the first SIGTERM does."""
        self.signals.request_stop()

    def _on_tick(self) -> None:
        """Every heartbeat tick, before its beat: STATUS and the watchdog ping.

        ``STATUS=`` from here only while a foreground holds the main thread
        (otherwise the main thread sends it); ``WATCHDOG=1`` when a ping is
        due and the daemon is healthy.
        """
        systemd = self.systemd
        if not systemd.enabled:
            return
        try:
            if self._in_foreground:
                systemd.status(self.status_line())
            if systemd.ping_due() and self.healthy():
                systemd.ping()
        except Exception as exc:  # systemd chatter must never break the heartbeat
            self.log.debug("systemd notification failed: %s", exc)

    # -- start-up helpers ------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Sleep, woken by a stop request (then raise :class:`StopRequested`)."""
        if self.timing.wait(self.signals.event, seconds) or self.stop_requested:
            raise StopRequested()

    def wait_for_database(self, probe: Callable[[], T]) -> T:
        """Run ``probe`` until the database answers, for ``connect_retry_s`` at most (then raise)."""

        def announce(exc: DatabaseUnavailable) -> None:
            log_event(
                self.log,
                logging.WARNING,
                f"{self.role}.waiting_for_database",
                error=str(exc),
                wait_s=self.connect_retry_s,
            )

        return wait_for_database(
            probe,
            retry_s=self.connect_retry_s,
            stopping=lambda: self.stop_requested,
            on_first_failure=announce,
            clock=self.timing.clock,
            sleep=self.sleep,
            rand=self.timing.rand,
        )

    # -- lifecycle -------------------------------------------------------

    def start(self, services: Sequence[Component] | None = None) -> None:
        """Register, start the heartbeat, then each service in order; idempotent.

        If a service fails to start, the ones started before it are stopped
        (in reverse) and the error is raised.
        """
        with self._lifecycle:
            if self._started:
                return
            if services is not None:
                self.services = list(services)
            self._phase = "starting"
            self.heartbeat.register()  # a broken database fails the start here
            self._started = True
            try:
                for component in [self.heartbeat, *self.services]:
                    component.start()
                    self._running.append(component)
            except BaseException:
                self._stop_running()
                raise
            self._phase = "running"
        self.heartbeat.trigger()  # show the running state now, not one interval later
        log_event(
            self.log,
            logging.INFO,
            f"{self.role}.started",
            **{self.id_field: self.id},
            **self.started_fields(),
        )

    def stop(self) -> bool:
        """Stop the services in reverse, the heartbeat last, mark the row stopped.

        Safe twice and before :meth:`start`. Returns whether it stopped a
        started daemon (so the caller logs and notifies once).
        """
        with self._lifecycle:
            was_started, self._started = self._started, False
            self._phase = "stopping"
            self._stop_running()
            if was_started:
                self.heartbeat.mark_stopped()
        if was_started:
            log_event(
                self.log,
                logging.INFO,
                f"{self.role}.stopped",
                **{self.id_field: self.id},
                **self.stopped_fields(),
            )
        return was_started

    def _stop_running(self) -> None:
        """Stop what was started, last first; one failing stop does not skip the others."""
        while self._running:
            component = self._running.pop()
            try:
                component.stop(timeout=self.stop_timeout_s)
            except Exception:
                self.log.exception("%s: error while stopping %r", self.role, component)

    def main(
        self,
        prepare: Callable[[], object] | None = None,
        foreground: Callable[[], int] | None = None,
    ) -> int:
        """The console script's process: install the stop signals, then :meth:`run`.

        Call it on the main thread (Python delivers signals there only).
        """
        self.signals.install()
        return self.run(prepare, foreground)

    def run(
        self,
        prepare: Callable[[], object] | None = None,
        foreground: Callable[[], int] | None = None,
    ) -> int:
        """The whole life: prepare, start, run the foreground or wait, stop; the exit code.

        ``foreground`` runs on this thread once the daemon is started, until a
        stop; it returns the exit code. Without one, this thread waits for a
        stop request and the code is 0. Errors of ``prepare``, ``start`` and
        the foreground propagate (the console script turns them into exit
        codes), except that an unreachable database is a clean stop when a
        stop was asked for while waiting. Installs no signal handler: any
        thread may call it.
        """
        try:
            if prepare is not None:
                prepare()
        except StopRequested:
            pass
        except DatabaseUnavailable:
            if not self.stop_requested:
                raise
        if self.stop_requested:  # told to stop while starting: a clean stop
            self.systemd.stopping()
            return ExitCode.OK
        code: int = ExitCode.OK
        try:
            self.start()
            self.systemd.ready(self.status_line())
            if foreground is not None:
                self._in_foreground = True
                code = foreground()
            else:
                while not self.signals.event.wait(self.status_poll_s):
                    self.systemd.status(self.status_line())
                log_event(self.log, logging.INFO, f"{self.role}.stopping", reason="signal")
        except StopRequested:  # stopped while registering (the worker retries until then)
            pass
        finally:
            self._in_foreground = False
            self.systemd.stopping(self.stopping_status)
            self.stop()
        return code
