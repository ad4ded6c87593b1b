"""Scheduled work under a test's clock: ``sync_schedules`` and ``tick``.

A ``queue-scheduler`` does two things a test wants without the process: it
writes the app's ``@periodic`` declarations into the ``schedules`` table at
start, then its ticker enqueues every due slot exactly once. Here both run in
the test's process, on the target's own connection (so a client bound to the
test's open transaction sees the schedules and jobs it wrote), and time is the
test's: :func:`sync_schedules` starts the cursors at the clock's instant and
:func:`tick` runs the real :class:`~queue_engine.scheduler.ticker.Ticker` once
at the clock's ``now``. Nothing sleeps; a test moves the clock with
:meth:`TestClock.advance <queue_engine.testing.clock.TestClock.advance>`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import LazyConnection
from queue_engine.producer.schedules import ScheduleSpec, schedule_registry
from queue_engine.scheduler import store as schedule_store
from queue_engine.scheduler.ticker import GRACE_DEFAULT_S, Ticker, TickResult
from queue_engine.testing.assertions import Target, connection_of, schema_of
from queue_engine.testing.clock import Instant, instant_of

__all__ = ["TESTING_APP", "sync_schedules", "tick"]

#: The app name code schedules are synced under by default (a scheduler's ``--app``).
TESTING_APP = "queue_engine.testing"


def sync_schedules(
    target: Target,
    specs: Iterable[ScheduleSpec] | None = None,
    *,
    start: Instant | None = None,
    app: str = TESTING_APP,
    schema: str | None = None,
) -> schedule_store.SyncResult:
    """Write schedules into the table as ``queue-scheduler --app`` does at start.

    ``specs`` defaults to every ``@periodic`` declared so far (import your app
    module first). With ``start`` (a datetime or a :class:`TestClock`), the
    schedules' cursors start at that instant: the first slot :func:`tick`
    enqueues is the first one after it. Without it they start at the
    database's ``now()``, as in production.
    """
    chosen = list(schedule_registry.specs() if specs is None else specs)
    schema = schema_of(target, schema)
    with connection_of(target) as conn:
        result = schedule_store.sync_code(conn, schema, chosen, app=app)
        if start is not None and chosen:
            with conn.transaction():
                conn.execute(
                    queries.query("schedule_set_cursor", schema),
                    {"at": instant_of(start), "names": [s.name for s in chosen]},
                )
    return result


def tick(
    target: Target,
    at: Instant,
    *,
    grace_s: float = GRACE_DEFAULT_S,
    schema: str | None = None,
) -> TickResult:
    """Run the scheduler's ticker once as of ``at``: every due slot is enqueued once.

    ``at`` is a datetime or a :class:`TestClock` (read now). The ticker is the
    production one (the same slot rules, the same exactly-once record in
    ``schedule_runs``, ``grace_s`` deciding which slots are late and which
    missed); only its time is the test's. A second tick at the same instant
    enqueues nothing. Returns the ticker's
    :class:`~queue_engine.scheduler.ticker.TickResult` (``enqueued``,
    ``skipped``, ``missed``, ``next_wake``).
    """
    schema = schema_of(target, schema)
    with connection_of(target) as conn:
        ticker = Ticker(
            conn.info.dsn,
            schema,
            scheduler_id="queue-engine-testing",
            grace_s=grace_s,
            now=lambda: instant_of(at),
        )
        ticker.db = _Borrowed(conn)
        return ticker.run_once()


class _Borrowed(LazyConnection):
    """The target's connection, lent to the ticker: never opened or closed by it."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        super().__init__(conn.info.dsn)
        self._borrowed = conn

    def get(self) -> psycopg.Connection[Any]:
        """The target's connection, as it is."""
        return self._borrowed

    @property
    def is_open(self) -> bool:
        """True while the target's connection is open."""
        return not self._borrowed.closed

    def reset(self) -> None:
        """Nothing: the connection is the target's to close."""
