"""The orchestrator process's core: migrate, register, elect, and run leader-only sweeps.

One object composes the services, each with the shared lifecycle of
:mod:`queue_engine.service`:

- :class:`~queue_engine.orchestrator.heartbeat.Heartbeat` keeps this process's
  row in the workers table fresh (every orchestrator, leader or not);
- :class:`~queue_engine.orchestrator.leader.LeaderElector` competes for the
  leader lock and calls back when the role changes;
- the leader-only services (the
  :class:`~queue_engine.orchestrator.reaper.Reaper`, the
  :class:`~queue_engine.orchestrator.dead_workers.DeadWorkerSweep` and
  :class:`~queue_engine.orchestrator.fast_recovery.FastRecovery`) are started
  when this process is elected and stopped when it steps down, so exactly the
  leader sweeps.

Under systemd the heartbeat also pings the service manager's watchdog
(``WATCHDOG=1``, see :mod:`queue_engine.systemd`): a process whose threads
stopped running is killed and restarted, while a database outage (which the
orchestrator survives by design) does not stop the pings.

:meth:`Orchestrator.start` and :meth:`Orchestrator.stop` follow the same
contract as a service (start returns at once, stop blocks, both idempotent).
Migrations are a separate, explicit step (:meth:`Orchestrator.migrate`) so the
command line can retry an unreachable database for a bounded time first.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queue_engine import metrics
from queue_engine.config import env_float, env_str, resolve_dsn, resolve_schema
from queue_engine.errors import ConfigError, DatabaseUnavailable
from queue_engine.migrate import Migration, Migrator
from queue_engine.orchestrator.analyzer import Analyzer
from queue_engine.orchestrator.dead_workers import DEAD_AFTER_BEATS, DeadWorkerSweep
from queue_engine.orchestrator.fast_recovery import RECOVERY_DEFAULT_S, FastRecovery
from queue_engine.orchestrator.heartbeat import HEARTBEAT_DEFAULT_S, Heartbeat
from queue_engine.orchestrator.leader import (
    ELECT_INTERVAL_DEFAULT_S,
    RECONNECT_BACKOFF_MAX_S,
    LeaderElector,
)
from queue_engine.orchestrator.pruner import Pruner
from queue_engine.orchestrator.reaper import (
    BATCH_SIZE_DEFAULT,
    SWEEP_DEFAULT_S,
    Reaper,
)
from queue_engine.service import Service, log_event
from queue_engine.systemd import SystemdNotifier, watchdog_interval_s

#: How long start-up keeps retrying an unreachable database before exiting 69
#: (``QUEUE_ENGINE_CONNECT_RETRY_S``, the same setting as the worker's).
CONNECT_RETRY_DEFAULT_S = 10.0
#: How long a clean stop waits for each service's current run.
STOP_TIMEOUT_S = 10.0

log = logging.getLogger("queue_engine.orchestrator")


@dataclass(frozen=True, slots=True)
class OrchestratorConfig:
    """Settings of one orchestrator; :meth:`from_env` reads ``QUEUE_ENGINE_*``."""

    dsn: str
    schema: str
    sweep_s: float = SWEEP_DEFAULT_S
    elect_s: float = ELECT_INTERVAL_DEFAULT_S
    heartbeat_s: float = HEARTBEAT_DEFAULT_S
    reconnect_max_s: float = RECONNECT_BACKOFF_MAX_S
    connect_retry_s: float = CONNECT_RETRY_DEFAULT_S
    reap_batch: int = BATCH_SIZE_DEFAULT
    #: Heartbeat age at which a worker owning a running job is flagged (None: 3 beats).
    dead_after_s: float | None = None
    #: Fast-recovery cadence; 0 turns it off (behind a transaction-pooling pgbouncer).
    recovery_s: float = RECOVERY_DEFAULT_S
    #: Serve /metrics and /health on this port (None: no HTTP server; 0: any free port).
    http_port: int | None = None
    http_host: str = "127.0.0.1"

    @property
    def dead_after(self) -> float:
        """``dead_after_s``, or three heartbeats when unset."""
        if self.dead_after_s is not None:
            return self.dead_after_s
        return DEAD_AFTER_BEATS * self.heartbeat_s

    @classmethod
    def from_env(
        cls,
        dsn: str | None = None,
        schema: str | None = None,
        *,
        http_port: int | None = None,
        http_host: str = "127.0.0.1",
    ) -> OrchestratorConfig:
        """Explicit values first, then the environment, then the defaults."""
        return cls(
            http_port=http_port,
            http_host=http_host,
            dsn=resolve_dsn(dsn),
            schema=resolve_schema(schema),
            sweep_s=env_float("SWEEP_S", SWEEP_DEFAULT_S, minimum=0.05),
            elect_s=env_float("ELECT_S", ELECT_INTERVAL_DEFAULT_S, minimum=0.05),
            heartbeat_s=env_float("HEARTBEAT_S", HEARTBEAT_DEFAULT_S, minimum=0.05),
            reconnect_max_s=env_float("RECONNECT_MAX_S", RECONNECT_BACKOFF_MAX_S, minimum=0.1),
            connect_retry_s=env_float("CONNECT_RETRY_S", CONNECT_RETRY_DEFAULT_S),
            dead_after_s=_optional_float("DEAD_AFTER_S", minimum=0.1),
            recovery_s=_recovery_s(),
        )


def _optional_float(name: str, *, minimum: float) -> float | None:
    """A numeric setting with no fixed default (unset: None)."""
    if env_str(name) is None:
        return None
    return env_float(name, 0.0, minimum=minimum)


def _recovery_s() -> float:
    """``QUEUE_ENGINE_RECOVERY_S``: 0 (off) or at least 0.05 s."""
    value = env_float("RECOVERY_S", RECOVERY_DEFAULT_S)
    if 0 < value < 0.05:
        raise ConfigError(f"QUEUE_ENGINE_RECOVERY_S={value:g} must be 0 (off) or at least 0.05")
    return value


def orchestrator_id() -> str:
    """A workers-table id unique per process start (pid reuse across restarts is common)."""
    return f"orchestrator@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Orchestrator:
    """Heartbeat + leader election + leader-only sweeps, with one start/stop."""

    def __init__(
        self, config: OrchestratorConfig, *, notifier: SystemdNotifier | None = None
    ) -> None:
        self.config = config
        self.id = orchestrator_id()
        self._lifecycle = threading.Lock()
        self._started = False
        self._stopping = False
        self.notifier = notifier or SystemdNotifier()
        # Under a systemd watchdog the heartbeat beats at least twice per WatchdogSec,
        # also while its database writes fail (their backoff is capped to match).
        watchdog_s = watchdog_interval_s() if self.notifier.enabled else None
        beat_s = config.heartbeat_s if watchdog_s is None else min(config.heartbeat_s, watchdog_s)
        self.heartbeat = Heartbeat(
            config.dsn,
            config.schema,
            worker_id=self.id,
            state=self.state,
            telemetry=self._telemetry,
            interval_s=beat_s,
            on_beat=self._watchdog_ping if watchdog_s is not None else None,
            backoff_max_s=watchdog_s,
        )
        self.reaper = Reaper(
            config.dsn, config.schema, interval_s=config.sweep_s, batch_size=config.reap_batch
        )
        self.dead_workers = DeadWorkerSweep(
            config.dsn, config.schema, dead_after_s=config.dead_after, interval_s=config.sweep_s
        )
        self.leader_services: list[Service[Any]] = [self.reaper, self.dead_workers]
        self.fast_recovery: FastRecovery | None = None
        if config.recovery_s > 0:
            self.fast_recovery = FastRecovery(
                config.dsn, config.schema, interval_s=config.recovery_s
            )
            self.leader_services.append(self.fast_recovery)
        self.pruner = Pruner.from_env(config.dsn, config.schema)
        self.leader_services.append(self.pruner)
        # Statistics: ANALYZE jobs after a burst (orchestrator/analyzer.py, issue 16).
        self.analyzer = Analyzer(config.dsn, config.schema)
        self.leader_services.append(self.analyzer)
        for service in self.leader_services:
            service.on_result = metrics.record_result
        self.metrics_server: metrics.MetricsServer | None = None
        self.elector = LeaderElector(
            config.dsn,
            config.schema,
            on_elected=self._elected,
            on_demoted=self._demoted,
            interval_s=config.elect_s,
            backoff_max_s=config.reconnect_max_s,
        )

    @property
    def is_leader(self) -> bool:
        """True while this process leads."""
        return self.elector.is_leader

    def state(self) -> str:
        """The state written to the workers row."""
        if self._stopping:
            return "stopping"
        if not self._started:
            return "starting"
        return "leader" if self.elector.is_leader else "standby"

    def _watchdog_ping(self) -> None:
        """Ping systemd's watchdog while the election loop is alive (a wedged process is restarted)."""
        if self.elector.running:
            self.notifier.watchdog()

    def _telemetry(self) -> dict[str, Any]:
        from queue_engine import __version__

        return {"version": __version__, "sweep_s": self.config.sweep_s}

    def migrate(
        self,
        *,
        stopping: Callable[[], bool] = lambda: False,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> list[Migration]:
        """Apply pending migrations, retrying an unreachable database for ``connect_retry_s``.

        Two orchestrators starting at once are safe: the migrator holds an
        advisory lock, so the second waits and then finds nothing to do.
        """
        deadline = clock() + self.config.connect_retry_s
        announced = False
        while True:
            try:
                applied = Migrator(self.config.dsn, schema=self.config.schema).up()
            except DatabaseUnavailable as exc:
                if clock() >= deadline or stopping():
                    raise
                if not announced:
                    log_event(
                        log,
                        logging.WARNING,
                        "orchestrator.waiting_for_database",
                        error=str(exc),
                        wait_s=self.config.connect_retry_s,
                    )
                    announced = True
                sleep(0.5)
                continue
            for migration in applied:
                log_event(
                    log,
                    logging.INFO,
                    "orchestrator.migrated",
                    version=migration.version,
                    name=migration.name,
                )
            return applied

    def start(self) -> None:
        """Register (raising if the database is unreachable), then start heartbeat and election."""
        with self._lifecycle:
            if self._started:
                return
            self._stopping = False
            self.heartbeat.run_once()  # register now; a broken database fails the start
            self._started = True
        log_event(
            log,
            logging.INFO,
            "orchestrator.started",
            id=self.id,
            schema=self.config.schema,
            sweep_s=self.config.sweep_s,
            dead_after_s=self.config.dead_after,
            recovery_s=self.config.recovery_s,
        )
        self.heartbeat.start()
        self.elector.start()
        if self.config.http_port is not None:
            self.metrics_server = metrics.start_metrics_server(
                self.config.dsn,
                self.config.schema,
                self.config.http_port,
                self.config.http_host,
                is_leader=lambda: self.is_leader,
                dead_after=self.config.dead_after,
            )
            log_event(
                log,
                logging.INFO,
                "orchestrator.http_started",
                host=self.config.http_host,
                port=self.metrics_server.port,
            )

    def stop(self) -> None:
        """Resign leadership, stop every service, mark the row stopped; safe twice or before start."""
        with self._lifecycle:
            was_started, self._started = self._started, False
            self._stopping = True
        # The elector's loop resigns on exit, which stops the leader services. Every
        # wait is bounded: the threads are daemons, so a hung one cannot keep the
        # process from exiting once the main thread returns.
        if self.metrics_server is not None:
            self.metrics_server.stop()
        self.elector.stop(timeout=STOP_TIMEOUT_S)
        for service in self.leader_services:
            service.stop(timeout=STOP_TIMEOUT_S)
        self.heartbeat.stop(timeout=STOP_TIMEOUT_S)
        if was_started:
            self.heartbeat.mark_stopped()
            log_event(log, logging.INFO, "orchestrator.stopped", id=self.id)

    def _elected(self) -> None:
        for service in self.leader_services:
            service.start()
        self.heartbeat.trigger()

    def _demoted(self) -> None:
        # Bounded: a sweep stuck on a dead connection must not keep the elector from
        # competing again; it ends on its own (keepalives) and a new start waits for it.
        for service in self.leader_services:
            service.stop(timeout=STOP_TIMEOUT_S)
        self.heartbeat.trigger()
