"""The orchestrator's own row in the workers table, kept fresh by a heartbeat.

Operators (``queue-ctl workers``) and the dead-worker sweep read this table to
see which orchestrators run where, which one leads, and whether they are alive;
so the orchestrator registers at start (synchronously, so a broken database
fails the start) and then upserts its row every ``interval_s`` with its role
state (``leader`` / ``standby``) and its process's RSS and CPU from psutil.

Each beat also carries the host telemetry workers send (load average, GPUs via
``nvidia-smi``; :mod:`queue_engine.telemetry`), merged into the role's own
``telemetry`` document, and publishes it on ``<schema>.telemetry`` in the same
statement: a GPU box running only an orchestrator or a scheduler shows on the
same dashboards and metrics as one running workers, without a second query.

``on_beat`` is called at the start of every beat, before the database write:
the orchestrator pings the systemd watchdog there, so the pings prove the
process still runs its loops without depending on the database being up.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil
import psycopg

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
HEARTBEAT_DEFAULT_S = 10.0

log = logging.getLogger("queue_engine.heartbeat")


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """One heartbeat: the state written."""

    state: str
    changed: bool

    @property
    def did_work(self) -> bool:
        """Never: beats are routine (debug); role changes are logged by the elector."""
        return False

    def log_fields(self) -> dict[str, Any]:
        """The state written."""
        return {"state": self.state}


class Heartbeat(Service[HeartbeatResult]):
    """Upsert this process's workers row every interval."""

    name = "heartbeat"
    #: The ``workers.role`` this process registers as.
    role = "orchestrator"

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        worker_id: str,
        state: Callable[[], str],
        telemetry: Callable[[], dict[str, Any]] = dict,
        interval_s: float = HEARTBEAT_DEFAULT_S,
        on_beat: Callable[[], None] | None = None,
        backoff_max_s: float | None = None,
        gpu: GpuProbe | None = None,
        clock: Clock = time.monotonic,
        wait: Wait = event_wait,
    ) -> None:
        """``telemetry`` gives the role's own keys; ``gpu`` None probes ``nvidia-smi`` on PATH."""
        super().__init__(interval_s=interval_s, stagger_s=0.0, clock=clock, wait=wait, logger=log)
        self.on_beat = on_beat
        #: Cap of the delay after failed beats (None: the shared service backoff).
        self.backoff_max_s = backoff_max_s
        self.schema = schema
        self.worker_id = worker_id
        self.state = state
        self.telemetry = telemetry
        self.gpu = gpu if gpu is not None else GpuProbe()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.db = LazyConnection(dsn, **KEEPALIVE_KWARGS)
        self._process = psutil.Process(self.pid)
        self._last_state: str | None = None

    def run_once(self) -> HeartbeatResult:
        """Write the row now."""
        if self.on_beat is not None:
            self.on_beat()
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
        try:
            self.db.get().execute(queries.query("orchestrator_heartbeat", self.schema), params)
        except psycopg.OperationalError:
            self.db.reset()
            raise
        changed = state != self._last_state
        self._last_state = state
        return HeartbeatResult(state=state, changed=changed)

    def _telemetry_document(self) -> dict[str, Any]:
        """The role's keys, then the host's ``load`` and ``gpu``, which win on a clash.

        Host keys last: metrics and dashboards read ``load``/``gpu`` from every
        row with one meaning, whatever the role's callable returns.
        """
        return {**self.telemetry(), **host_telemetry(self.gpu)}

    def next_interval(self, result: HeartbeatResult | None) -> float:
        """The shared cadence and backoff, the backoff capped at ``backoff_max_s`` when set."""
        interval = super().next_interval(result)
        if result is None and self.backoff_max_s is not None:
            return min(interval, max(self.backoff_max_s, self.interval_s))
        return interval

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
