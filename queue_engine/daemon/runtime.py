"""The daemon runtime: one lifecycle for every long-running process of the engine.

A daemon module says *which* services it runs; this module runs them the
same way for every role:

1. **Signals** (:mod:`.signals`): the first SIGTERM/SIGINT asks for a
   graceful stop, a second one exits 130 at once.
2. **Prepare**: the daemon's own start-up work (the orchestrator migrates,
   the scheduler waits for its schema and syncs code schedules), with
   :meth:`DaemonRuntime.wait_for_database` (one backoff, one deadline, exit
   69 after ``QUEUE_ENGINE_CONNECT_RETRY_S``) and an interruptible
   :meth:`DaemonRuntime.sleep`. A stop during this phase exits 0.
3. **Start**: the heartbeat registers the process's row synchronously (a
   database that cannot be written fails the start), then its loop and the
   daemon's services start in order. If one fails to start, those already
   started are stopped in reverse and the error propagates.
4. **Run**: ``READY=1`` with the status line, then the main thread waits for
   the stop event and sends ``STATUS=`` when the status line changes. The
   heartbeat pings the systemd watchdog before each beat while the daemon
   says it is healthy (:mod:`.notify` holds the ping interval).
5. **Stop**: ``STOPPING=1``, the services in reverse order, the heartbeat
   last, then the row is marked ``stopped``. Stop is safe twice and before
   start, and every wait is bounded (``stop_timeout_s`` per service; their
   threads are daemons, so a hung one cannot keep the process alive).

The workers-row state is the runtime's phase (``starting``, ``stopping``)
around the daemon's own state while running (``leader``/``standby``,
``running``). Exit code: :meth:`DaemonRuntime.run` returns 0; errors
propagate to the console script, which maps them (69, 2, 3...).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from queue_engine import settings as table
from queue_engine.daemon.heartbeat import HEARTBEAT_DEFAULT_S, BeatTarget, Heartbeat, WorkersRow
from queue_engine.daemon.identity import process_id
from queue_engine.daemon.notify import SystemdLink
from queue_engine.daemon.signals import StopSignals
from queue_engine.daemon.startup import StopRequested, wait_for_database
from queue_engine.errors import DatabaseUnavailable
from queue_engine.exit_codes import ExitCode
from queue_engine.service import log_event
from queue_engine.systemd import SystemdNotifier

T = TypeVar("T")

#: The roles that run on this runtime (their ``<role>.started`` ... events are catalogued).
DAEMON_ROLES = ("orchestrator", "scheduler")
#: How long a clean stop waits for each service's current run.
STOP_TIMEOUT_S = 10.0
#: How often the main thread re-reads the status line for ``STATUS=``.
STATUS_POLL_S = 0.5
#: Default of ``QUEUE_ENGINE_CONNECT_RETRY_S``: how long start-up retries an unreachable database.
CONNECT_RETRY_DEFAULT_S = table.CONNECT_RETRY_S.default

log = logging.getLogger("queue_engine.daemon")


class Component(Protocol):
    """What the runtime starts and stops: a :class:`~queue_engine.service.Service`, or an adapter."""

    def start(self) -> None:
        """Start; return at once."""
        ...

    def stop(self, timeout: float | None = ...) -> None:
        """Stop within ``timeout``; safe twice and before ``start``."""
        ...


def _always() -> bool:
    return True


class DaemonRuntime:
    """Signals, wait-for-database, heartbeat, ordered start and reverse stop, systemd."""

    def __init__(
        self,
        role: str,
        *,
        dsn: str,
        schema: str,
        state: Callable[[], str],
        status: Callable[[], str],
        heartbeat_s: float = HEARTBEAT_DEFAULT_S,
        connect_retry_s: float = CONNECT_RETRY_DEFAULT_S,
        telemetry: Callable[[], dict[str, Any]] = dict,
        healthy: Callable[[], bool] = _always,
        started_fields: Callable[[], dict[str, Any]] = dict,
        stopping_status: str = "stopping",
        worker_id: str | None = None,
        beat_target: BeatTarget | None = None,
        notifier: SystemdNotifier | None = None,
        environ: dict[str, str] | None = None,
        exit: Callable[[int], object] = os._exit,
        stop_timeout_s: float = STOP_TIMEOUT_S,
        status_poll_s: float = STATUS_POLL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``state`` is the row state while running; ``status`` the ``systemctl status`` line.

        ``healthy`` gates the watchdog pings (False: a loop that matters has
        stopped, let systemd restart us). ``beat_target`` replaces the default
        workers-row write (the worker's beat also renews its leases).
        """
        self.role = role
        self.id = worker_id or process_id(role)
        self.connect_retry_s = connect_retry_s
        self.daemon_state = state
        self.status_line = status
        self.healthy = healthy
        self.started_fields = started_fields
        self.stopping_status = stopping_status
        self.stop_timeout_s = stop_timeout_s
        self.status_poll_s = status_poll_s
        self.clock = clock
        self.log = logging.getLogger(f"queue_engine.{role}")
        self.systemd = SystemdLink(notifier, environ=environ)
        self.signals = StopSignals(role, exit=exit, logger=self.log)
        target = beat_target or WorkersRow(
            dsn, schema, worker_id=self.id, role=role, state=self.row_state, telemetry=telemetry
        )
        # Under a systemd watchdog the heartbeat beats at least once per ping interval,
        # also while its database writes fail (the retry delay is capped to the cadence).
        beat_s = self.systemd.beat_interval_s(heartbeat_s)
        self.heartbeat = Heartbeat(
            target, interval_s=beat_s, on_beat=self._on_beat, backoff_max_s=beat_s
        )
        #: The daemon's services, started in this order after the heartbeat, stopped in reverse.
        self.services: list[Component] = []
        self._lifecycle = threading.Lock()
        self._phase = "starting"
        self._running: list[Component] = []
        self._started = False

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

    def _on_beat(self) -> None:
        """Before every beat: ping the systemd watchdog while the daemon is healthy."""
        try:
            if self.healthy():
                self.systemd.ping()
        except Exception as exc:  # systemd chatter must never break the heartbeat
            self.log.debug("watchdog ping failed: %s", exc)

    # -- start-up helpers ------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Sleep, woken by a stop request (then raise :class:`StopRequested`)."""
        if self.signals.event.wait(max(0.0, seconds)):
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
            clock=self.clock,
            sleep=self.sleep,
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
            self.log, logging.INFO, f"{self.role}.started", id=self.id, **self.started_fields()
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
            log_event(self.log, logging.INFO, f"{self.role}.stopped", id=self.id)
        return was_started

    def _stop_running(self) -> None:
        """Stop what was started, last first; one failing stop does not skip the others."""
        while self._running:
            component = self._running.pop()
            try:
                component.stop(timeout=self.stop_timeout_s)
            except Exception:
                self.log.exception("%s: error while stopping %r", self.role, component)

    def run(self, prepare: Callable[[], object] | None = None) -> int:
        """The whole life of the process: signals, prepare, start, wait, stop; return 0.

        Errors of ``prepare`` and ``start`` propagate (the console script turns
        them into exit codes), except that an unreachable database is a clean
        stop when a stop was asked for while waiting.
        """
        self.signals.install()
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
        try:
            self.start()
            self.systemd.ready(self.status_line())
            while not self.signals.event.wait(self.status_poll_s):
                self.systemd.status(self.status_line())
            log_event(self.log, logging.INFO, f"{self.role}.stopping", reason="signal")
        finally:
            self.systemd.stopping(self.stopping_status)
            self.stop()
        return ExitCode.OK
