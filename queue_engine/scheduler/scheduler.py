"""The ``queue-scheduler`` process: sync code schedules, then tick, listen and heartbeat.

One object composes three services with the shared lifecycle of
:mod:`queue_engine.service`:

- :class:`~queue_engine.scheduler.ticker.Ticker` enqueues due slots;
- :class:`~queue_engine.scheduler.ticker.ScheduleListener` wakes the ticker on
  a ``<schema>.schedules`` NOTIFY (a ``queue-ctl schedules`` change);
- :class:`SchedulerHeartbeat` keeps this process's row in the workers table
  (role ``scheduler``) fresh and pings the systemd watchdog while the ticker's
  loop is alive.

Schedulers need no election: every one of them considers every slot and the
database lets exactly one enqueue it (see :mod:`queue_engine.scheduler.ticker`),
so running two is the way to make scheduling highly available.
"""

from __future__ import annotations

import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from queue_engine import settings as table
from queue_engine.config import resolve_dsn, resolve_schema
from queue_engine.db import connect
from queue_engine.errors import ConfigError, DatabaseUnavailable, MigrationError
from queue_engine.migrate import engine_migrations_dir, load_chain, wait_for_schema
from queue_engine.orchestrator.heartbeat import HEARTBEAT_DEFAULT_S, Heartbeat
from queue_engine.scheduler import store
from queue_engine.scheduler.schedules import ScheduleSpec
from queue_engine.scheduler.ticker import (
    GRACE_DEFAULT_S,
    MAX_SLEEP_DEFAULT_S,
    RECONNECT_MAX_DEFAULT_S,
    RUNS_KEEP_DEFAULT_S,
    ScheduleListener,
    Ticker,
)
from queue_engine.service import log_event
from queue_engine.systemd import SystemdNotifier, watchdog_interval_s

log = logging.getLogger("queue_engine.scheduler")

#: How long start-up retries an unreachable database before exiting 69.
CONNECT_RETRY_DEFAULT_S = 10.0
#: How long a clean stop waits for each service's current run.
STOP_TIMEOUT_S = 10.0
#: The watchdog is pinged only if the ticker's loop ran within this many seconds.
TICKER_STALE_S = 60.0
#: The migration that creates the schedules tables (its number may change; its name does not).
SCHEDULES_MIGRATION = "schedules"


def schedules_schema_version() -> int:
    """The engine schema version that has the schedules tables."""
    for migration in load_chain(engine_migrations_dir()):
        if migration.name == SCHEDULES_MIGRATION:
            return migration.version
    raise MigrationError(f"no '{SCHEDULES_MIGRATION}' migration in the engine's chain")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Settings of one scheduler; :meth:`from_env` reads ``QUEUE_ENGINE_*``."""

    dsn: str
    schema: str
    app: str | None = None
    grace_s: float = GRACE_DEFAULT_S
    max_sleep_s: float = MAX_SLEEP_DEFAULT_S
    heartbeat_s: float = HEARTBEAT_DEFAULT_S
    reconnect_max_s: float = RECONNECT_MAX_DEFAULT_S
    connect_retry_s: float = CONNECT_RETRY_DEFAULT_S
    runs_keep_s: float = RUNS_KEEP_DEFAULT_S

    @classmethod
    def from_env(
        cls, dsn: str | None = None, schema: str | None = None, app: str | None = None
    ) -> SchedulerConfig:
        """Explicit values first, then the environment (:mod:`queue_engine.settings`)."""
        return cls(
            dsn=resolve_dsn(dsn),
            schema=resolve_schema(schema),
            app=app or None,
            **table.read_fields(ENV_FIELDS),
        )


#: The scheduler's fields that come from the settings table, and their settings.
ENV_FIELDS: dict[str, table.Setting[Any]] = {
    "grace_s": table.SCHEDULER_GRACE_S,
    "max_sleep_s": table.SCHEDULER_POLL_S,
    "heartbeat_s": table.HEARTBEAT_S,
    "reconnect_max_s": table.RECONNECT_MAX_S,
    "connect_retry_s": table.CONNECT_RETRY_S,
    "runs_keep_s": table.SCHEDULER_RUNS_KEEP_S,
}


def scheduler_id() -> str:
    """A workers-table id unique per process start."""
    return f"scheduler@{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class SchedulerHeartbeat(Heartbeat):
    """The orchestrator's heartbeat service, writing a ``scheduler`` row.

    The scheduler passes ``on_beat`` (ping the systemd watchdog, update the
    status) and ``backoff_max_s = interval``: the hook runs before every
    attempt, successful or not, and a failed beat is retried at the same
    cadence, because the watchdog watches this process, not the database, so a
    scheduler waiting out a Postgres restart stays up, while one whose ticker
    hangs is restarted.
    """

    name = "scheduler_heartbeat"
    role = "scheduler"


class Scheduler:
    """Ticker + listener + heartbeat, with one start/stop."""

    def __init__(
        self,
        config: SchedulerConfig,
        specs: Sequence[ScheduleSpec] = (),
        *,
        notifier: SystemdNotifier | None = None,
    ) -> None:
        self.config = config
        self.specs = list(specs)
        self.id = scheduler_id()
        self.notifier = notifier or SystemdNotifier()
        self._lifecycle = threading.Lock()
        self._started = False
        self._stopping = False
        self.ticker = Ticker(
            config.dsn,
            config.schema,
            scheduler_id=self.id,
            grace_s=config.grace_s,
            max_sleep_s=config.max_sleep_s,
            reconnect_max_s=config.reconnect_max_s,
            runs_keep_s=config.runs_keep_s,
        )
        self.listener = ScheduleListener(
            config.dsn,
            config.schema,
            on_change=self.ticker.trigger,
            reconnect_max_s=config.reconnect_max_s,
        )
        watchdog = watchdog_interval_s()
        beat = config.heartbeat_s if watchdog is None else min(config.heartbeat_s, watchdog)
        self.heartbeat = SchedulerHeartbeat(
            config.dsn,
            config.schema,
            worker_id=self.id,
            state=self.state,
            telemetry=self._telemetry,
            interval_s=beat,
            on_beat=self._after_beat,
            backoff_max_s=beat,
        )

    def state(self) -> str:
        """The state written to the workers row."""
        if self._stopping:
            return "stopping"
        return "running" if self._started else "starting"

    def _telemetry(self) -> dict[str, Any]:
        from queue_engine import __version__

        result = self.ticker.last_result
        return {
            "version": __version__,
            "app": self.config.app,
            "schedules": None if result is None else result.schedules,
            "next_wake": None if result is None or result.next_wake is None else result.next_wake,
        }

    def _after_beat(self) -> None:
        if self._ticker_alive():
            self.notifier.watchdog()
        self.notifier.status(self.status_line())

    def _ticker_alive(self) -> bool:
        last = self.ticker.last_loop_at
        return (
            self.ticker.running
            and last is not None
            and time.monotonic() - last < max(TICKER_STALE_S, 3 * self.config.max_sleep_s)
        )

    def prepare(
        self,
        *,
        stopping: Callable[[], bool] = lambda: False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> store.SyncResult | None:
        """Wait for the database (up to ``connect_retry_s``: else exit 69) and the schema; sync.

        Code schedules are synced here, before the first tick, so operators see
        them (with their next fire time) as soon as the scheduler runs.
        """
        deadline = time.monotonic() + self.config.connect_retry_s
        attempt = 0
        while True:
            try:
                connect(self.config.dsn).close()
                break
            except DatabaseUnavailable as exc:
                if time.monotonic() >= deadline or stopping():
                    raise
                if attempt == 0:
                    log_event(
                        log,
                        logging.WARNING,
                        "scheduler.waiting_for_database",
                        error=str(exc),
                        wait_s=self.config.connect_retry_s,
                    )
                attempt += 1
                sleep(min(2.0, 0.1 * 2**attempt) * (0.5 + random.random() / 2))  # noqa: S311
        wait_for_schema(
            self.config.dsn,
            schedules_schema_version(),
            schema=self.config.schema,
            sleep=sleep,
        )
        if self.config.app is None:
            return None
        with connect(self.config.dsn) as conn:
            result = store.sync_code(conn, self.config.schema, self.specs, app=self.config.app)
        log_event(
            log,
            logging.INFO,
            "scheduler.synced",
            app=self.config.app,
            declared=len(self.specs),
            created=",".join(result.created) or "-",
            updated=",".join(result.updated) or "-",
            removed=",".join(result.removed) or "-",
        )
        return result

    def start(self) -> None:
        """Register (raising if the database is unreachable), start the services, notify READY."""
        with self._lifecycle:
            if self._started:
                return
            self._stopping = False
            self.heartbeat.run_once()  # register now; a broken database fails the start
            self._started = True
        self.ticker.start()
        self.listener.start()
        self.heartbeat.start()
        log_event(
            log,
            logging.INFO,
            "scheduler.started",
            id=self.id,
            schema=self.config.schema,
            app=self.config.app or "-",
            grace_s=self.config.grace_s,
        )
        self.notifier.ready(f"scheduler {self.id}")

    def status_line(self) -> str:
        """The one-line systemd status: schedules watched and the next wake-up."""
        result = self.ticker.last_result
        if result is None:
            return "starting"
        wake = result.next_wake.isoformat(timespec="seconds") if result.next_wake else "none"
        return f"{result.schedules} schedules, next slot {wake}"

    def stop(self) -> None:
        """Stop every service, mark the row stopped; safe twice or before start."""
        with self._lifecycle:
            was_started, self._started = self._started, False
            self._stopping = True
        if was_started:
            self.notifier.stopping()
        self.ticker.stop(timeout=STOP_TIMEOUT_S)
        self.listener.stop(timeout=STOP_TIMEOUT_S)
        self.heartbeat.stop(timeout=STOP_TIMEOUT_S)
        if was_started:
            self.heartbeat.mark_stopped()
            log_event(log, logging.INFO, "scheduler.stopped", id=self.id)


def check_specs(specs: Sequence[ScheduleSpec]) -> None:
    """Refuse two code schedules with one name (the registry refuses it too; belt and braces)."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigError(f"schedule {spec.name!r} is declared twice")
        seen.add(spec.name)
