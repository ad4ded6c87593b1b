"""The heartbeat of every daemon: its row in the workers table, kept fresh.

Operators (``queue-ctl workers``) and the dead-worker sweep read the workers
table to see which processes run where, in which state, and whether they are
alive. A daemon registers at start (synchronously, so a broken database fails
the start) and then beats every period.

Two parts, so that what is written can vary by role while the cadence,
backoff and watchdog rules stay one:

- a :class:`BeatTarget` registers, writes one beat and marks the row stopped
  at the end. :class:`WorkersRow` is the target of the orchestrator and the
  scheduler: it upserts the row with the role's state, the process's RSS and
  CPU (psutil) and the host telemetry workers send (load average, GPUs via
  ``nvidia-smi``; :mod:`queue_engine.daemon.telemetry`) merged into the role's own
  ``telemetry`` document, and publishes that on ``<schema>.telemetry`` in the
  same statement. The claim worker's target
  (:class:`~queue_engine.worker.renewal.Renewer`) writes its row together
  with the leases, progress and cancel flags of the jobs it holds, on the
  worker's own connection;
- :class:`Heartbeat` is the :class:`~queue_engine.daemon.service.Service` that calls
  the target. It *ticks*, and ``on_tick`` runs at the start of every tick,
  before any database write: the daemon runtime sends systemd its watchdog
  pings there, so the pings prove the process still runs its loops without
  depending on the database being up.

Two cadences, one class. A plain target is beaten at every tick, every
``interval_s`` (and after failed beats the shared service backoff, capped by
``max_tick_s`` so the pings continue through a database outage). A target
that is also a :class:`Cadence` (the claim worker's) says its own period and
has work between beats, so the heartbeat ticks often (:data:`TICK_S`) and
beats only when due:

- every :meth:`Cadence.period_s`: ``interval_s`` (the heartbeat setting),
  shorter while a held job has a short lease of its own (the ticks shorten
  with it, four per period, so such a lease is renewed about three times per
  TTL), longer while the worker holds no job; a worker that starts a job
  beats at the next tick once a beat is overdue;
- early, at most every ``progress_interval_s``, when a handler reported
  progress (a handler reporting in a tight loop costs no round trip per
  report);
- between beats, while a job runs, the ticks read the notifications already
  on the socket, so a cancel NOTIFY is seen within a tick.

A failed beat of a ticking heartbeat is logged (``heartbeat.failed``) and
retried at the next period without stopping the ticks (systemd, cancels and
progress must go on); a plain one raises, and the service backoff applies.
Clock and wait come from the service's :class:`~queue_engine.daemon.service.Timing`,
so both cadences are unit-tested without sleeping.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import psutil

from queue_engine.daemon.service import REAL_TIMING, Service, Timing
from queue_engine.daemon.telemetry import GpuProbe, host_telemetry
from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import KEEPALIVE_KWARGS, LazyConnection
from queue_engine.foundation.logs import log_event

#: Heartbeat cadence (seconds); ``QUEUE_ENGINE_HEARTBEAT_S``.
HEARTBEAT_DEFAULT_S = table.HEARTBEAT_S.default
#: Seconds between the ticks of a :class:`Cadence` target (at most; less for a short period).
TICK_S = 0.25
#: Pending progress is written at most this often.
PROGRESS_INTERVAL_S = 0.5

log = logging.getLogger("queue_engine.heartbeat")


class BeatTarget(Protocol):
    """What a heartbeat writes: the registration, one beat, and the clean-stop mark."""

    def register(self) -> str:
        """Write the first beat at start (raise when the database cannot be written); the state."""
        ...

    def beat(self) -> str:
        """Write one beat (raise on failure); return the state written."""
        ...

    def mark_stopped(self) -> None:
        """Record a clean stop; best effort, never raises."""
        ...


@runtime_checkable
class Cadence(Protocol):
    """A beat target with a period of its own and work between beats: the claim worker's."""

    def period_s(self) -> float:
        """Seconds from one beat to the next now (a held job's short lease shortens it)."""
        ...

    def progress_pending(self) -> bool:
        """True when a handler reported progress that is not written yet (beat early)."""
        ...

    def job_running(self) -> bool:
        """True while a handler executes (the main loop is not using the connection)."""
        ...

    def poll_notifications(self) -> None:
        """Handle the notifications already received (a cancel NOTIFY), never waiting."""
        ...


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """One tick: whether it beat, and the state written if it did."""

    beat: bool
    state: str | None = None

    @property
    def did_work(self) -> bool:
        """Never: beats are routine (debug); role changes are logged by the daemons."""
        return False

    def log_fields(self) -> dict[str, Any]:
        """``beat=True|False`` and the state written."""
        return {"beat": self.beat} if self.state is None else {"beat": True, "state": self.state}


class WorkersRow:
    """A daemon's row in the workers table (role, state, RSS/CPU, telemetry), on its own connection."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        worker_id: str,
        role: str,
        state: Callable[[], str],
        telemetry: Callable[[], dict[str, Any]] = dict,
        gpu: GpuProbe | None = None,
    ) -> None:
        """``telemetry`` gives the role's own keys; ``gpu`` None probes ``nvidia-smi`` on PATH."""
        self.schema = schema
        self.worker_id = worker_id
        self.role = role
        self.state = state
        self.telemetry = telemetry
        self.gpu = gpu if gpu is not None else GpuProbe()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.db = LazyConnection(dsn, **KEEPALIVE_KWARGS)
        self._process = psutil.Process(self.pid)

    def register(self) -> str:
        """The first beat: the same upsert."""
        return self.beat()

    def beat(self) -> str:
        """Upsert the row now and publish the telemetry document."""
        state = self.state()
        try:
            memory = self._process.memory_info().rss
            cpu = self._process.cpu_percent(interval=None)
        except psutil.Error:
            memory, cpu = None, None
        params = {
            "id": self.worker_id,
            "role": self.role,
            "host": self.host,
            "pid": self.pid,
            "state": state,
            "rss_bytes": memory,
            "cpu_percent": cpu,
            "telemetry": json.dumps(self._telemetry_document(), default=str),
            "telemetry_channel": queries.telemetry_channel(self.schema),
        }
        with self.db.session() as conn:
            conn.execute(queries.query("orchestrator_heartbeat", self.schema), params)
        return state

    def _telemetry_document(self) -> dict[str, Any]:
        """The role's keys, then the host's ``load`` and ``gpu``, which win on a clash.

        Host keys last: metrics and dashboards read ``load``/``gpu`` from every
        row with one meaning, whatever the role's callable returns.
        """
        return {**self.telemetry(), **host_telemetry(self.gpu)}

    def mark_stopped(self) -> None:
        """Record a clean stop; best effort (the database may be the reason we stop)."""
        try:
            self.db.get().execute(
                queries.query("orchestrator_stopped", self.schema), {"id": self.worker_id}
            )
        except Exception as exc:
            log.debug("could not mark %s stopped: %s", self.worker_id, exc)
        finally:
            self.db.reset()


class Heartbeat(Service[HeartbeatResult]):
    """Tick, and beat the target when due; the registration runs in :meth:`register`."""

    name = "heartbeat"

    def __init__(
        self,
        target: BeatTarget,
        *,
        interval_s: float = HEARTBEAT_DEFAULT_S,
        on_tick: Callable[[], None] | None = None,
        max_tick_s: float | None = None,
        progress_interval_s: float = PROGRESS_INTERVAL_S,
        timing: Timing = REAL_TIMING,
    ) -> None:
        """``interval_s`` is the beat period; ``max_tick_s`` the longest wait between ticks.

        ``max_tick_s`` (the systemd ping interval) also caps the backoff after
        failed beats of a plain target. A :class:`Cadence` target ticks every
        :data:`TICK_S` at most and is beaten when due.
        """
        self.cadence = target if isinstance(target, Cadence) else None
        tick_s = interval_s if self.cadence is None else min(TICK_S, interval_s)
        if max_tick_s is not None:
            tick_s = min(tick_s, max_tick_s)
        super().__init__(interval_s=tick_s, stagger_s=0.0, timing=timing, logger=log)
        self.target = target
        self.on_tick = on_tick
        #: The beat period (a :class:`Cadence` target may shorten or lengthen it).
        self.heartbeat_s = interval_s
        #: Cap of the delay after failed beats of a plain target (None: the shared backoff).
        self.backoff_max_s = max_tick_s
        self.progress_interval_s = progress_interval_s
        self.registered = False
        self.consecutive_beat_errors = 0
        self._last_beat = timing.clock()
        self._tick_s = self.interval_s

    def register(self) -> None:
        """The first beat, synchronously: a database that cannot be written fails the start."""
        self.target.register()
        self._last_beat = self.timing.clock()
        self.registered = True

    def run_once(self) -> HeartbeatResult:
        """One tick: ``on_tick``, then the work between beats, then the beat if it is due."""
        if self.on_tick is not None:
            self.on_tick()
        cadence = self.cadence
        if cadence is None:
            return HeartbeatResult(beat=True, state=self.target.beat())
        if cadence.job_running():
            cadence.poll_notifications()
        now = self.timing.clock()
        # The target's period may be shorter (a short lease) or longer (an idle worker).
        period = cadence.period_s()
        # A shortened period is ticked a few times over, so it is kept, not rounded up.
        self._tick_s = (
            self.interval_s if period >= self.heartbeat_s else min(self.interval_s, period / 4)
        )
        since = now - self._last_beat
        if since < period and not (
            since >= self.progress_interval_s and cadence.progress_pending()
        ):
            return HeartbeatResult(beat=False)
        # Advance first: a failing beat is retried at the next period, not in a tight loop.
        self._last_beat = now
        try:
            state = self.target.beat()
        except Exception as exc:
            self.consecutive_beat_errors += 1
            log_event(
                self.log,
                logging.WARNING,
                "heartbeat.failed",
                error=f"{type(exc).__name__}: {exc}",
                consecutive=self.consecutive_beat_errors,
                retry_in_s=round(period, 3),
            )
            return HeartbeatResult(beat=False)
        self.consecutive_beat_errors = 0
        return HeartbeatResult(beat=True, state=state)

    def next_interval(self, result: HeartbeatResult | None) -> float:
        """The tick (shorter while a period is short); after a failed run, the capped backoff."""
        if result is not None:
            return self._tick_s
        interval = super().next_interval(result)
        if self.backoff_max_s is not None:
            return min(interval, max(self.backoff_max_s, self.interval_s))
        return interval

    def mark_stopped(self) -> None:
        """Record a clean stop of a registered process (call after :meth:`stop`); once."""
        if self.registered:
            self.registered = False
            self.target.mark_stopped()
