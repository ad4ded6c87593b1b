"""The heartbeat of every daemon: its row in the workers table, kept fresh.

Operators (``queue-ctl workers``) and the dead-worker sweep read the workers
table to see which processes run where, in which state, and whether they are
alive. A daemon registers at start (the first beat runs synchronously, so a
broken database fails the start) and then beats every ``interval_s``.

Two parts, so that what is written can vary by role while the cadence,
backoff and watchdog rules stay one:

- a :class:`BeatTarget` writes one beat and marks the row stopped at the end.
  :class:`WorkersRow` is the target of the orchestrator and the scheduler: it
  upserts the row with the role's state, the process's RSS and CPU (psutil)
  and the host telemetry workers send (load average, GPUs via ``nvidia-smi``;
  :mod:`queue_engine.telemetry`) merged into the role's own ``telemetry``
  document, and publishes that on ``<schema>.telemetry`` in the same
  statement. The claim worker's beat (its row plus the leases of the jobs it
  holds, on its own connection) is meant to be another target;
- :class:`Heartbeat` is the :class:`~queue_engine.service.Service` that calls
  the target. ``on_beat`` runs at the start of every beat, before the
  database write: the daemon runtime pings the systemd watchdog there, so the
  pings prove the process still runs its loops without depending on the
  database being up. ``backoff_max_s`` caps the retry delay after failed
  beats, so the pings also continue through a database outage.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import psutil

from queue_engine import settings as table
from queue_engine import sql as queries
from queue_engine.service import (
    KEEPALIVE_KWARGS,
    Clock,
    LazyConnection,
    Service,
    Wait,
    event_wait,
)
from queue_engine.telemetry import GpuProbe, host_telemetry

#: Heartbeat cadence (seconds); ``QUEUE_ENGINE_HEARTBEAT_S``.
HEARTBEAT_DEFAULT_S = table.HEARTBEAT_S.default

log = logging.getLogger("queue_engine.heartbeat")


class BeatTarget(Protocol):
    """What a heartbeat writes: one beat, and the clean-stop mark."""

    def beat(self) -> str:
        """Write one beat (raise on failure); return the state written."""
        ...

    def mark_stopped(self) -> None:
        """Record a clean stop; best effort, never raises."""
        ...


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """One heartbeat: the state written."""

    state: str
    changed: bool

    @property
    def did_work(self) -> bool:
        """Never: beats are routine (debug); role changes are logged by the daemons."""
        return False

    def log_fields(self) -> dict[str, Any]:
        """The state written."""
        return {"state": self.state}


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
    """Beat the target every interval; the first beat (registration) runs in ``start``."""

    name = "heartbeat"

    def __init__(
        self,
        target: BeatTarget,
        *,
        interval_s: float = HEARTBEAT_DEFAULT_S,
        on_beat: Callable[[], None] | None = None,
        backoff_max_s: float | None = None,
        clock: Clock = time.monotonic,
        wait: Wait = event_wait,
    ) -> None:
        super().__init__(interval_s=interval_s, stagger_s=0.0, clock=clock, wait=wait, logger=log)
        self.target = target
        self.on_beat = on_beat
        #: Cap of the delay after failed beats (None: the shared service backoff).
        self.backoff_max_s = backoff_max_s
        self._last_state: str | None = None
        self.registered = False

    def run_once(self) -> HeartbeatResult:
        """Call ``on_beat``, then write the beat."""
        if self.on_beat is not None:
            self.on_beat()
        state = self.target.beat()
        changed = state != self._last_state
        self._last_state = state
        return HeartbeatResult(state=state, changed=changed)

    def register(self) -> None:
        """The first beat, synchronously: a database that cannot be written fails the start."""
        self.run_once()
        self.registered = True

    def next_interval(self, result: HeartbeatResult | None) -> float:
        """The shared cadence and backoff, the backoff capped at ``backoff_max_s`` when set."""
        interval = super().next_interval(result)
        if result is None and self.backoff_max_s is not None:
            return min(interval, max(self.backoff_max_s, self.interval_s))
        return interval

    def mark_stopped(self) -> None:
        """Record a clean stop of a registered process (call after :meth:`stop`); once."""
        if self.registered:
            self.registered = False
            self.target.mark_stopped()
