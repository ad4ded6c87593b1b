"""Leader election among orchestrators, with a Postgres session advisory lock.

The protocol
------------
Every orchestrator keeps one dedicated connection for the election. On it, it
calls ``pg_try_advisory_lock(hashtextextended('<schema>.leader', 0))``
(``sql/leader_try_acquire.sql``):

- the one that gets the lock is the leader and runs the leader-only services
  (the reaper, later the other sweeps) until it stops leading;
- the others are standbys and try again every ``interval_s`` (about 1 s).

A session-level advisory lock belongs to the database session, not to a
transaction, so it is held exactly as long as the leader's connection lives.
When the leader process exits, is killed (``kill -9``), or its connection is
cut, the server ends the session and releases the lock; the next standby to
try becomes leader, within about one interval. No lease table, no clock
comparison between hosts.

The leader confirms every interval, on the same connection, that its session
still holds the lock (``sql/leader_check.sql``). If that fails — the
connection dropped, or the lock is gone — it steps down at once (stops the
leader-only services) and, once it can reconnect (capped exponential backoff),
competes again like a standby. Stepping down when in doubt matters more than
leading without a gap: two leaders for a moment are tolerable (every sweep is
a guarded, idempotent statement with ``SKIP LOCKED``) but a leader that keeps
sweeping after it lost the lock is not what the lock is for.

While the database is down, the backoff wait pings the server every second
(:class:`~queue_engine.daemon.outage.OutageProbe`) and ends as soon as it accepts
connections again, so a leader is elected within about a second of Postgres
being back, whatever the backoff had grown to.

A server that has not noticed a dead client (a network partition rather than
a closed socket) keeps the old session, and so the lock, until TCP keepalives
time it out; the election connection enables keepalives for that reason.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from queue_engine.daemon.outage import OutageProbe, reconnect_backoff
from queue_engine.daemon.service import REAL_TIMING, Service, Timing
from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import (
    KEEPALIVE_KWARGS,
    RECONNECT_OR_UNREACHABLE,
    LazyConnection,
    first_line,
)
from queue_engine.foundation.logs import log_event

#: Standby retry and leader self-check cadence (seconds).
ELECT_INTERVAL_DEFAULT_S = table.ELECT_S.default
#: Cap of the reconnect backoff after the election connection failed.
RECONNECT_BACKOFF_MAX_S = table.RECONNECT_MAX_S.default


log = logging.getLogger("queue_engine.orchestrator")


def leader_key(schema: str) -> str:
    """The advisory-lock key text for a schema; one leader per engine schema."""
    return f"{schema}.leader"


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One election round: are we leader now, and did that change."""

    leader: bool
    changed: bool = False
    error: str | None = None

    @property
    def did_work(self) -> bool:
        """Never: role changes are logged as their own events (``orchestrator.leader_*``)."""
        return False

    def log_fields(self) -> dict[str, Any]:
        """Role and, after a failure, why."""
        fields: dict[str, Any] = {"role": "leader" if self.leader else "standby"}
        if self.error:
            fields["error"] = self.error
        return fields


class LeaderElector(Service[ElectionResult]):
    """Compete for, hold, and confirm leadership; call back when the role changes."""

    name = "leader"

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        on_elected: Callable[[], None] = lambda: None,
        on_demoted: Callable[[], None] = lambda: None,
        interval_s: float = ELECT_INTERVAL_DEFAULT_S,
        backoff_max_s: float = RECONNECT_BACKOFF_MAX_S,
        timing: Timing = REAL_TIMING,
        outage: OutageProbe | None = None,
    ) -> None:
        # No stagger: a fresh orchestrator should lead (or know it stands by) at once.
        super().__init__(
            interval_s=interval_s,
            stagger_s=0.0,
            timing=timing,
            logger=log,
            outage=outage if outage is not None else OutageProbe(dsn),
        )
        self.schema = schema
        self.key = leader_key(schema)
        self.on_elected = on_elected
        self.on_demoted = on_demoted
        self.backoff_max_s = backoff_max_s
        self.db = LazyConnection(dsn, **KEEPALIVE_KWARGS)
        self.is_leader = False
        self.connection_failures = 0

    def run_once(self) -> ElectionResult:
        """Try to become leader, or confirm we still are; step down on any doubt."""
        try:
            conn = self.db.get()
            if self.is_leader:
                if self._still_holds(conn):
                    self.connection_failures = 0
                    return ElectionResult(leader=True)
                self._step_down("the leader lock is no longer held by this session")
                return ElectionResult(leader=False, changed=True)
            acquired = self._try_acquire(conn)
            if self.connection_failures:
                log_event(log, logging.INFO, "orchestrator.db_available", role="standby")
            self.connection_failures = 0
        except RECONNECT_OR_UNREACHABLE as exc:
            self.connection_failures += 1
            self.db.reset()
            reason = first_line(exc)
            if self.is_leader:
                self._step_down(f"election connection failed: {reason}")
                return ElectionResult(leader=False, changed=True, error=reason)
            log_event(
                log,
                logging.WARNING if self.connection_failures == 1 else logging.DEBUG,
                "orchestrator.db_unavailable",
                error=reason,
                retry_in_s=round(self.next_interval(None), 1),
            )
            return ElectionResult(leader=False, error=reason)
        if acquired:
            self.is_leader = True
            log_event(log, logging.INFO, "orchestrator.leader_acquired", key=self.key)
            self.on_elected()
            return ElectionResult(leader=True, changed=True)
        return ElectionResult(leader=False)

    def _try_acquire(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(queries.plain("leader_try_acquire"), {"key": self.key}).fetchone()
        return bool(row and row[0])

    def _still_holds(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(queries.plain("leader_check"), {"key": self.key}).fetchone()
        return bool(row and row[0])

    def _step_down(self, reason: str) -> None:
        """Stop leading now: leader-only services stop before we report it."""
        self.is_leader = False
        try:
            self.on_demoted()
        finally:
            log_event(log, logging.WARNING, "orchestrator.leader_lost", reason=reason)

    def next_interval(self, result: ElectionResult | None) -> float:
        """``interval_s``, or a capped exponential backoff while the database is unreachable."""
        if result is None:
            return super().next_interval(None)
        if self.connection_failures:
            backoff = reconnect_backoff(self.interval_s, self.backoff_max_s)
            return backoff.delay(self.connection_failures, self.timing.rand)
        return self.interval_s

    def in_outage(self, result: ElectionResult | None) -> bool:
        """True while the election connection fails: the backoff wait probes the server."""
        return result is None or self.connection_failures > 0

    def resign(self) -> None:
        """Stop leading and release the lock (clean stop); safe when not leading."""
        was_leader = self.is_leader
        self.is_leader = False
        if was_leader:
            try:
                self.on_demoted()
            finally:
                # If this fails the session is ending anyway, which releases the lock.
                if self.db.is_open:
                    with contextlib.suppress(psycopg.Error):
                        self.db.get().execute(queries.plain("leader_release"), {"key": self.key})
                log_event(log, logging.INFO, "orchestrator.leader_released", key=self.key)
        self.db.reset()

    def on_stop(self) -> None:
        """Leaving the loop: resign on the loop thread, so no run races the release."""
        self.resign()
