"""The ``queue-scheduler`` process: sync code schedules, then tick, listen and heartbeat.

The lifecycle (signals, waiting for the database, the heartbeat of this
process's workers row with role ``scheduler``, ordered start and reverse
stop, systemd) is the shared :class:`~queue_engine.daemon.DaemonRuntime`;
this module says what the scheduler runs on it:

- *prepare*: wait for the database (exit 69 after ``connect_retry_s``) and
  the schedules tables, then sync the app's code schedules;
- :class:`~queue_engine.scheduler.ticker.Ticker` enqueues due slots;
- :class:`~queue_engine.scheduler.ticker.ScheduleListener` wakes the ticker on
  a ``<schema>.schedules`` NOTIFY (a ``queue-ctl schedules`` change).

The heartbeat pings the systemd watchdog while the ticker's loop is alive.

Schedulers need no election: every one of them considers every slot and the
database lets exactly one enqueue it (see :mod:`queue_engine.scheduler.ticker`),
so running two is the way to make scheduling highly available.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from queue_engine.daemon import HEARTBEAT_DEFAULT_S, DaemonRuntime
from queue_engine.daemon.pooler import refuse_shared_sessions
from queue_engine.daemon.systemd import SystemdNotifier
from queue_engine.foundation import settings as table
from queue_engine.foundation.config import resolve_dsn, resolve_schema
from queue_engine.foundation.db import connect
from queue_engine.foundation.errors import ConfigError, MigrationError
from queue_engine.foundation.logs import log_event
from queue_engine.foundation.migrate import engine_migrations_dir, load_chain, wait_for_schema
from queue_engine.foundation.version import __version__
from queue_engine.producer.schedules import ScheduleSpec
from queue_engine.scheduler import store
from queue_engine.scheduler.ticker import (
    GRACE_DEFAULT_S,
    MAX_SLEEP_DEFAULT_S,
    RECONNECT_MAX_DEFAULT_S,
    RUNS_KEEP_DEFAULT_S,
    ScheduleListener,
    Ticker,
)

log = logging.getLogger("queue_engine.scheduler")

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
class SchedulerSettings:
    """Settings of one scheduler; :meth:`from_env` reads ``QUEUE_ENGINE_*``."""

    dsn: str
    schema: str
    app: str | None = None
    grace_s: float = GRACE_DEFAULT_S
    max_sleep_s: float = MAX_SLEEP_DEFAULT_S
    heartbeat_s: float = HEARTBEAT_DEFAULT_S
    reconnect_max_s: float = RECONNECT_MAX_DEFAULT_S
    connect_retry_s: float = table.CONNECT_RETRY_S.default
    runs_keep_s: float = RUNS_KEEP_DEFAULT_S

    @classmethod
    def from_env(
        cls, dsn: str | None = None, schema: str | None = None, app: str | None = None
    ) -> SchedulerSettings:
        """Explicit values first, then the environment (:mod:`queue_engine.foundation.settings`)."""
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


class Scheduler:
    """Ticker + listener, run by the daemon runtime (which keeps the heartbeat)."""

    def __init__(
        self,
        settings: SchedulerSettings,
        specs: Sequence[ScheduleSpec] = (),
        *,
        notifier: SystemdNotifier | None = None,
        exit: Callable[[int], object] = os._exit,
    ) -> None:
        """``exit`` ends the process on a second SIGTERM (tests may replace it)."""
        self.settings = settings
        self.specs = list(specs)
        self.runtime = DaemonRuntime(
            "scheduler",
            dsn=settings.dsn,
            schema=settings.schema,
            state=lambda: "running",
            status=self.status_line,
            heartbeat_s=settings.heartbeat_s,
            connect_retry_s=settings.connect_retry_s,
            telemetry=self._telemetry,
            # The watchdog watches this process, not the database: a scheduler waiting
            # out a Postgres restart stays up, one whose ticker hangs is restarted.
            healthy=self._ticker_alive,
            started_fields=lambda: {
                "schema": settings.schema,
                "app": settings.app or "-",
                "grace_s": settings.grace_s,
            },
            notifier=notifier,
            exit=exit,
        )
        self.id = self.runtime.id
        self.heartbeat = self.runtime.heartbeat
        self.ticker = Ticker(
            settings.dsn,
            settings.schema,
            scheduler_id=self.id,
            grace_s=settings.grace_s,
            max_sleep_s=settings.max_sleep_s,
            reconnect_max_s=settings.reconnect_max_s,
            runs_keep_s=settings.runs_keep_s,
        )
        self.listener = ScheduleListener(
            settings.dsn,
            settings.schema,
            on_change=self.ticker.trigger,
            reconnect_max_s=settings.reconnect_max_s,
        )
        # Started in this order after the heartbeat, stopped in reverse.
        self.runtime.services = [self.ticker, self.listener]

    def state(self) -> str:
        """The state written to the workers row: starting, running or stopping."""
        return self.runtime.row_state()

    def _telemetry(self) -> dict[str, Any]:
        result = self.ticker.last_result
        return {
            "version": __version__,
            "app": self.settings.app,
            "schedules": None if result is None else result.schedules,
            "next_wake": None if result is None or result.next_wake is None else result.next_wake,
        }

    def _ticker_alive(self) -> bool:
        last = self.ticker.last_loop_at
        return (
            self.ticker.running
            and last is not None
            and time.monotonic() - last < max(TICKER_STALE_S, 3 * self.settings.max_sleep_s)
        )

    def prepare(self) -> store.SyncResult | None:
        """Wait for the database (up to ``connect_retry_s``: else exit 69) and the schema; sync.

        Code schedules are synced here, before the first tick, so operators see
        them (with their next fire time) as soon as the scheduler runs.
        """
        self.runtime.wait_for_database(lambda: connect(self.settings.dsn).close())
        refuse_shared_sessions(self.settings.dsn, "queue-scheduler")
        wait_for_schema(
            self.settings.dsn,
            schedules_schema_version(),
            schema=self.settings.schema,
            sleep=self.runtime.sleep,
        )
        if self.settings.app is None:
            return None
        with connect(self.settings.dsn) as conn:
            result = store.sync_code(conn, self.settings.schema, self.specs, app=self.settings.app)
        log_event(
            log,
            logging.INFO,
            "scheduler.synced",
            app=self.settings.app,
            declared=len(self.specs),
            created=",".join(result.created) or "-",
            updated=",".join(result.updated) or "-",
            removed=",".join(result.removed) or "-",
        )
        return result

    def main(self) -> int:
        """The command's process: prepare, then enqueue due slots until SIGTERM/SIGINT; 0."""
        return self.runtime.main(prepare=self.prepare)

    def start(self) -> None:
        """Register (raising if the database is unreachable), then start the services."""
        self.runtime.start()

    def status_line(self) -> str:
        """The one-line systemd status: schedules watched and the next wake-up."""
        result = self.ticker.last_result
        if result is None:
            return "starting"
        wake = result.next_wake.isoformat(timespec="seconds") if result.next_wake else "none"
        return f"{result.schedules} schedules, next slot {wake}"

    def stop(self) -> None:
        """Stop every service, mark the row stopped; safe twice or before start."""
        self.runtime.stop()


def check_specs(specs: Sequence[ScheduleSpec]) -> None:
    """Refuse two code schedules with one name (the registry refuses it too; belt and braces)."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ConfigError(f"schedule {spec.name!r} is declared twice")
        seen.add(spec.name)
