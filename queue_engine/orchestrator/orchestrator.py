"""The orchestrator process's core: migrate, then elect and run the leader-only sweeps.

The lifecycle (signals, waiting for the database, the heartbeat of this
process's workers row, ordered start and reverse stop, systemd) is the
shared :class:`~queue_engine.daemon.DaemonRuntime`; this module says what
the orchestrator runs on it:

- *prepare*: :meth:`Orchestrator.migrate` applies pending migrations,
  retrying an unreachable database for ``connect_retry_s`` (then exit 69);
- :class:`~queue_engine.orchestrator.leader.LeaderElector` competes for the
  leader lock and calls back when the role changes;
- the leader-only services (the
  :class:`~queue_engine.orchestrator.reaper.Reaper`, the
  :class:`~queue_engine.orchestrator.dead_workers.DeadWorkerSweep`,
  :class:`~queue_engine.orchestrator.fast_recovery.FastRecovery`, the
  :class:`~queue_engine.orchestrator.pruner.Pruner`, the
  :class:`~queue_engine.orchestrator.archiver.Archiver`, the workflow
  :class:`~queue_engine.orchestrator.input_timeouts.InputTimeouts` and
  :class:`~queue_engine.orchestrator.stuck_nodes.StuckNodeCheck`) are started when this
  process is elected and stopped when it steps down, so exactly the leader
  sweeps;
- optionally the ``/metrics`` and ``/health`` server.

The workers row shows ``leader`` or ``standby`` while running. Under systemd
the heartbeat pings the watchdog while the election loop is alive: a process
whose threads stopped running is killed and restarted, while a database
outage (which the orchestrator survives by design) does not stop the pings.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queue_engine.daemon import HEARTBEAT_DEFAULT_S, STOP_TIMEOUT_S, DaemonRuntime
from queue_engine.daemon.pooler import refuse_shared_sessions
from queue_engine.daemon.service import Service
from queue_engine.daemon.systemd import SystemdNotifier
from queue_engine.foundation import settings as table
from queue_engine.foundation.config import resolve_dsn, resolve_schema
from queue_engine.foundation.db import connect
from queue_engine.foundation.logs import log_event
from queue_engine.foundation.migrate import Migration, Migrator
from queue_engine.foundation.version import __version__
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.analyzer import Analyzer
from queue_engine.orchestrator.archiver import Archiver
from queue_engine.orchestrator.dead_workers import DeadWorkerSweep
from queue_engine.orchestrator.fast_recovery import RECOVERY_DEFAULT_S, FastRecovery
from queue_engine.orchestrator.input_timeouts import InputTimeouts
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
from queue_engine.orchestrator.stuck_nodes import CHECK_DEFAULT_S, StuckNodeCheck
from queue_engine.orchestrator.vacuumer import Vacuumer

log = logging.getLogger("queue_engine.orchestrator")


@dataclass(frozen=True, slots=True)
class OrchestratorSettings:
    """Settings of one orchestrator; :meth:`from_env` reads ``QUEUE_ENGINE_*``."""

    dsn: str
    schema: str
    sweep_s: float = SWEEP_DEFAULT_S
    elect_s: float = ELECT_INTERVAL_DEFAULT_S
    heartbeat_s: float = HEARTBEAT_DEFAULT_S
    reconnect_max_s: float = RECONNECT_BACKOFF_MAX_S
    connect_retry_s: float = table.CONNECT_RETRY_S.default
    reap_batch: int = BATCH_SIZE_DEFAULT
    #: Heartbeat age at which a worker owning a running job is flagged (None: 3 beats).
    dead_after_s: float | None = None
    #: Fast-recovery cadence; 0 turns it off (behind a transaction-pooling pgbouncer).
    recovery_s: float = RECOVERY_DEFAULT_S
    #: "No stuck workflow node" check cadence; 0 turns it off.
    workflow_check_s: float = CHECK_DEFAULT_S
    #: Serve /metrics and /health on this port (None: no HTTP server; 0: any free port).
    http_port: int | None = None
    http_host: str = "127.0.0.1"

    @property
    def dead_after(self) -> float:
        """``dead_after_s``, or three heartbeats when unset."""
        if self.dead_after_s is not None:
            return self.dead_after_s
        return table.DEAD_AFTER_BEATS * self.heartbeat_s

    @classmethod
    def from_env(
        cls,
        dsn: str | None = None,
        schema: str | None = None,
        *,
        http_port: int | None = None,
        http_host: str = "127.0.0.1",
    ) -> OrchestratorSettings:
        """Explicit values first, then the environment (:mod:`queue_engine.foundation.settings`)."""
        return cls(
            http_port=http_port,
            http_host=http_host,
            dsn=resolve_dsn(dsn),
            schema=resolve_schema(schema),
            **table.read_fields(ENV_FIELDS),
        )


#: The orchestrator's fields that come from the settings table, and their settings.
ENV_FIELDS: dict[str, table.Setting[Any]] = {
    "sweep_s": table.SWEEP_S,
    "elect_s": table.ELECT_S,
    "heartbeat_s": table.HEARTBEAT_S,
    "reconnect_max_s": table.RECONNECT_MAX_S,
    "connect_retry_s": table.CONNECT_RETRY_S,
    "dead_after_s": table.DEAD_AFTER_S,
    "recovery_s": table.RECOVERY_S,
    "workflow_check_s": table.WORKFLOW_CHECK_S,
}


class LeaderServices:
    """The leader-only services as one runtime component.

    The election starts them (``start`` does nothing); ``stop`` stops them
    all, bounded, in case the elector's own stop gave up waiting before its
    resign had stopped them.
    """

    def __init__(self, services: list[Service[Any]]) -> None:
        self.services = services

    def start(self) -> None:
        """Nothing: the leader services start when this process is elected."""

    def stop(self, timeout: float | None = STOP_TIMEOUT_S) -> None:
        """Stop every leader-only service (a no-op for those not running)."""
        for service in self.services:
            service.stop(timeout=timeout)


class MetricsEndpoint:
    """The optional ``/metrics`` and ``/health`` server as a runtime component."""

    def __init__(self, settings: OrchestratorSettings, is_leader: Callable[[], bool]) -> None:
        self.settings = settings
        self.is_leader = is_leader
        self.server: metrics.MetricsServer | None = None

    def start(self) -> None:
        """Bind and serve (raises ConfigError when the port cannot be bound)."""
        if self.server is not None:
            return
        settings = self.settings
        assert settings.http_port is not None
        self.server = metrics.start_metrics_server(
            settings.dsn,
            settings.schema,
            settings.http_port,
            settings.http_host,
            is_leader=self.is_leader,
            dead_after=settings.dead_after,
        )
        log_event(
            log,
            logging.INFO,
            "orchestrator.http_started",
            host=settings.http_host,
            port=self.server.port,
        )

    def stop(self, timeout: float | None = None) -> None:
        """Stop serving; safe twice and before start."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()


class Orchestrator:
    """Heartbeat + leader election + leader-only sweeps, run by the daemon runtime."""

    def __init__(
        self,
        settings: OrchestratorSettings,
        *,
        notifier: SystemdNotifier | None = None,
        exit: Callable[[int], object] = os._exit,
    ) -> None:
        """``exit`` ends the process on a second SIGTERM (tests may replace it)."""
        self.settings = settings
        self.runtime = DaemonRuntime(
            "orchestrator",
            dsn=settings.dsn,
            schema=settings.schema,
            state=self._role,
            status=self.status_line,
            heartbeat_s=settings.heartbeat_s,
            connect_retry_s=settings.connect_retry_s,
            telemetry=self._telemetry,
            # Ping systemd's watchdog while the election loop is alive (a wedged process is restarted).
            healthy=lambda: self.elector.running,
            started_fields=lambda: {
                "schema": settings.schema,
                "sweep_s": settings.sweep_s,
                "dead_after_s": settings.dead_after,
                "recovery_s": settings.recovery_s,
            },
            stopping_status="stopping: resigning and stopping the sweeps",
            notifier=notifier,
            exit=exit,
        )
        self.id = self.runtime.id
        self.heartbeat = self.runtime.heartbeat
        self.reaper = Reaper(
            settings.dsn,
            settings.schema,
            interval_s=settings.sweep_s,
            batch_size=settings.reap_batch,
        )
        self.dead_workers = DeadWorkerSweep(
            settings.dsn,
            settings.schema,
            dead_after_s=settings.dead_after,
            interval_s=settings.sweep_s,
        )
        self.leader_services: list[Service[Any]] = [self.reaper, self.dead_workers]
        self.fast_recovery: FastRecovery | None = None
        if settings.recovery_s > 0:
            self.fast_recovery = FastRecovery(
                settings.dsn, settings.schema, interval_s=settings.recovery_s
            )
            self.leader_services.append(self.fast_recovery)
        self.pruner = Pruner.from_env(settings.dsn, settings.schema)
        self.leader_services.append(self.pruner)
        # Scale: succeeded jobs leave the hot table (orchestrator/archiver.py, migration 0027).
        self.archiver = Archiver.from_env(settings.dsn, settings.schema)
        if self.archiver is not None:
            self.leader_services.append(self.archiver)
        # Statistics: ANALYZE jobs after a burst (orchestrator/analyzer.py, issue 16).
        self.analyzer = Analyzer(settings.dsn, settings.schema)
        self.leader_services.append(self.analyzer)
        # Claims: VACUUM jobs during a drain, so no claim walks a minute of dead
        # index entries waiting for autovacuum (orchestrator/vacuumer.py).
        self.vacuumer = Vacuumer.from_env(settings.dsn, settings.schema)
        if self.vacuumer is not None:
            self.leader_services.append(self.vacuumer)
        # Workflows: overdue input nodes fail with the reaper's cadence; the stuck-node
        # check reports an engine bug if it ever finds one (orchestrator/stuck_nodes.py).
        self.input_timeouts = InputTimeouts(
            settings.dsn, settings.schema, interval_s=settings.sweep_s
        )
        self.leader_services.append(self.input_timeouts)
        self.stuck_nodes: StuckNodeCheck | None = None
        if settings.workflow_check_s > 0:
            self.stuck_nodes = StuckNodeCheck(
                settings.dsn, settings.schema, interval_s=settings.workflow_check_s
            )
            self.leader_services.append(self.stuck_nodes)
        for service in self.leader_services:
            service.on_result = metrics.record_result
        self.elector = LeaderElector(
            settings.dsn,
            settings.schema,
            on_elected=self._elected,
            on_demoted=self._demoted,
            interval_s=settings.elect_s,
            backoff_max_s=settings.reconnect_max_s,
        )
        # Started in this order after the heartbeat, stopped in reverse: the metrics
        # server first, then the election (its loop resigns, which stops the leader
        # services), then the leader services again (bounded), the heartbeat last.
        self.metrics_endpoint: MetricsEndpoint | None = None
        self.runtime.services = [LeaderServices(self.leader_services), self.elector]
        if settings.http_port is not None:
            self.metrics_endpoint = MetricsEndpoint(settings, lambda: self.is_leader)
            self.runtime.services.append(self.metrics_endpoint)

    @property
    def is_leader(self) -> bool:
        """True while this process leads."""
        return self.elector.is_leader

    def _role(self) -> str:
        return "leader" if self.elector.is_leader else "standby"

    def state(self) -> str:
        """The state written to the workers row: starting, leader, standby or stopping."""
        return self.runtime.row_state()

    def status_line(self) -> str:
        """The one-line ``systemctl status`` text for the current role."""
        state = self.state()
        settings = self.settings
        if state == "leader":
            recovery = (
                f", fast recovery every {settings.recovery_s:g}s"
                if settings.recovery_s > 0
                else ", fast recovery off"
            )
            return (
                f"leader: reaper and dead-worker sweep every {settings.sweep_s:g}s{recovery} "
                f"(schema {settings.schema})"
            )
        if state == "standby":
            if self.elector.connection_failures:
                return "standby: database unavailable, reconnecting"
            return "standby: another orchestrator leads; taking over if it goes"
        return state

    def _telemetry(self) -> dict[str, Any]:
        return {"version": __version__, "sweep_s": self.settings.sweep_s}

    def migrate(self) -> list[Migration]:
        """Apply pending migrations, waiting for an unreachable database up to ``connect_retry_s``.

        Two orchestrators starting at once are safe: the migrator holds an
        advisory lock, so the second waits and then finds nothing to do.
        """
        self.runtime.systemd.status("migrating (waiting for the database if needed)")
        migrator = Migrator(self.settings.dsn, schema=self.settings.schema)
        self.runtime.wait_for_database(lambda: connect(self.settings.dsn).close())
        refuse_shared_sessions(self.settings.dsn, "queue-orchestrator")
        applied = self.runtime.wait_for_database(migrator.up)
        # One line at info whatever the number of steps (a first start applies
        # the whole chain); each step at debug.
        for migration in applied:
            log_event(
                log,
                logging.DEBUG,
                "orchestrator.migrated",
                version=migration.version,
                name=migration.name,
            )
        if applied:
            log_event(
                log,
                logging.INFO,
                "orchestrator.schema_migrated",
                version=applied[-1].version,
                applied=len(applied),
                schema=self.settings.schema,
            )
        return applied

    def main(self) -> int:
        """The command's process: migrate, then lead or stand by until SIGTERM/SIGINT; 0."""
        return self.runtime.main(prepare=self.migrate)

    def start(self) -> None:
        """Register (raising if the database is unreachable), then start the services."""
        self.runtime.start()

    def stop(self) -> None:
        """Resign leadership, stop every service, mark the row stopped; safe twice or before start."""
        self.runtime.stop()

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
