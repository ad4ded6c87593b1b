"""The ticker: decide which slots are due and enqueue each exactly once.

Why this module is long: the slot decisions (pure functions) and their
application to the database (one transaction per slot, job or workflow) are
one exactly-once protocol; keeping both halves together keeps the protocol
readable as a whole.

Decisions are pure functions of (schedule, cursor, now) — :func:`due_slots` and
:func:`plan_slots` — so the cron and catch-up rules are tested with a virtual
clock; :meth:`Ticker.run_once` applies them to the database and returns a
:class:`TickResult`.

Exactly once, with any number of schedulers (no leader): every scheduler
considers every slot. For one schedule, a scheduler

1. locks the schedule's row (``SELECT ... FOR UPDATE``) and reads its cursor
   ``checked_until`` afresh: slot decisions for one schedule are serial across
   schedulers, and a scheduler that lost the race sees the winner's cursor and
   finds nothing due;
2. inserts ``(schedule, slot)`` into ``schedule_runs`` — the primary key is the
   guarantee: a second insert of the same slot conflicts and enqueues nothing,
   whatever any scheduler believed — and inserts the job in the same
   transaction, so the slot is recorded if and only if its job exists;
3. moves the cursor past the slots it settled, and commits.

A schedule that starts a workflow (``@periodic(..., workflow=factory)``) takes
the same steps, with step 2 calling the factory and ``start_workflow`` (key
``schedule:<name>:<slot>``) instead of inserting a job, in the same
transaction. Only a scheduler whose app declares that factory acts on such a
schedule; others leave it alone (said once in the log).

A slot is *due* once ``now`` reaches it. A due slot older than ``grace_s`` is
*missed* (the schedulers were down or the database was unreachable): by
default it is skipped and logged; ``catchup=N`` enqueues the N newest missed
slots, oldest first. ``overlap="skip"`` records a slot as skipped while the
schedule's latest job (scheduled or manual) is still queued or running.

The loop sleeps until the earliest next slot across schedules, computed from
each expression (never by adding an interval to ``now``, so it does not
drift), at most ``max_sleep_s`` (a safety re-read of the table); a NOTIFY on
``<schema>.schedules`` wakes it at once (:class:`ScheduleListener`). After a
lost database, both retry after the reconnect backoff, cut short by an
:class:`~queue_engine.daemon.outage.OutageProbe` within about a second of Postgres
accepting connections again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from queue_engine.daemon.outage import OutageProbe, reconnect_backoff
from queue_engine.daemon.service import REAL_TIMING, Service, Timing
from queue_engine.foundation import settings as table
from queue_engine.foundation.db import (
    KEEPALIVE_KWARGS,
    RECONNECT_ERRORS,
    LazyConnection,
    first_line,
)
from queue_engine.foundation.errors import QueueEngineError
from queue_engine.foundation.logs import log_event
from queue_engine.producer.cron import Trigger
from queue_engine.producer.schedules import ScheduleSpec, WorkflowFactory, schedule_registry
from queue_engine.scheduler import store

log = logging.getLogger("queue_engine.scheduler")

# Defaults from the settings table (queue_engine.foundation.settings), the one source.
#: A due slot older than this is missed rather than late (``QUEUE_ENGINE_SCHEDULER_GRACE_S``).
GRACE_DEFAULT_S = table.SCHEDULER_GRACE_S.default
#: Longest sleep between two reads of the schedules table (``QUEUE_ENGINE_SCHEDULER_POLL_S``).
MAX_SLEEP_DEFAULT_S = table.SCHEDULER_POLL_S.default
#: First delay and cap of the reconnect backoff (``QUEUE_ENGINE_RECONNECT_MAX_S``; the same for every daemon).
RECONNECT_BASE_S = 0.1
RECONNECT_MAX_DEFAULT_S = table.RECONNECT_MAX_S.default
#: How long slot records are kept (``QUEUE_ENGINE_SCHEDULER_RUNS_KEEP_S``).
RUNS_KEEP_DEFAULT_S = table.SCHEDULER_RUNS_KEEP_S.default
#: How often old slot records are pruned.
PRUNE_EVERY_S = 60.0
#: At most this many slots are acted on per schedule and run (the rest next run).
MAX_SLOTS_PER_RUN = 1000
#: Missed slots are counted up to this many for the log line.
MISSED_COUNT_MAX = 10_000

Now = Callable[[], datetime]


def utc_now() -> datetime:
    """The production clock: wall-clock time, timezone-aware."""
    return datetime.now(UTC)


# -- pure decisions ---------------------------------------------------------


def due_slots(
    trigger: Trigger, after: datetime, now: datetime, limit: int = MAX_SLOTS_PER_RUN
) -> list[datetime]:
    """Slots ``s`` with ``after < s <= now``, oldest first (at most ``limit``)."""
    return trigger.between(after, now, limit)


@dataclass(frozen=True, slots=True)
class SlotPlan:
    """What to do with the due slots of one schedule."""

    fire: list[datetime]  # act on these, oldest first (enqueue, or skip for overlap)
    missed: int  # missed slots skipped (counted up to MISSED_COUNT_MAX)
    missed_more: bool  # True when there were more than that
    first_missed: datetime | None
    last_missed: datetime | None
    through: datetime | None  # the cursor moves here (None: nothing was due)


def plan_slots(
    trigger: Trigger, after: datetime, now: datetime, *, catchup: int = 0, grace: timedelta
) -> SlotPlan:
    """Split the slots in ``(after, now]`` into those to act on and those missed.

    Slots in ``(now - grace, now]`` are on time (late at most ``grace``) and
    always acted on. Older ones are missed: the ``catchup`` newest of them are
    acted on too (oldest first), the rest are skipped.
    """
    # Everything in UTC: datetimes sharing a tzinfo compare by wall clock (see Trigger).
    after, now = after.astimezone(UTC), now.astimezone(UTC)
    cutoff = now - grace
    on_time = trigger.between(max(after, cutoff), now, MAX_SLOTS_PER_RUN)
    caught: list[datetime] = []
    missed = 0
    first_missed = last_missed = newest_old = None
    more = False
    if after < cutoff:
        older = trigger.between(after, cutoff, MISSED_COUNT_MAX)
        if older:
            # The newest missed slots, newest first: catchup of them to enqueue, and
            # one more to name the last skipped slot in the log.
            newest: list[datetime] = []
            for slot in trigger.iter_before(cutoff + timedelta(microseconds=1)):
                if slot.astimezone(UTC) <= after or len(newest) > catchup:
                    break
                newest.append(slot)
            newest_old = newest[0]
            caught = list(reversed(newest[:catchup]))
            missed = max(0, len(older) - len(caught))
            more = len(older) >= MISSED_COUNT_MAX
            if missed:
                first_missed = older[0]
                last_missed = newest[len(caught)]
    fire = caught + on_time
    through = on_time[-1] if on_time else newest_old
    return SlotPlan(fire, missed, more, first_missed, last_missed, through)


# -- the service ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fired:
    """One slot acted on by this scheduler."""

    schedule: str
    slot: datetime
    job_id: int | None  # None: skipped because the previous job was still active
    workflow_id: int | None = None  # a workflow schedule's workflow


@dataclass(slots=True)
class TickResult:
    """One run: what was enqueued, skipped, missed, lost to another scheduler; when to wake."""

    enqueued: list[Fired] = field(default_factory=list)
    skipped: list[Fired] = field(default_factory=list)
    missed: dict[str, int] = field(default_factory=dict)
    conflicts: int = 0
    failed: list[str] = field(default_factory=list)
    schedules: int = 0
    next_wake: datetime | None = None

    @property
    def did_work(self) -> bool:
        """True when a slot was enqueued, skipped or missed."""
        return bool(self.enqueued or self.skipped or self.missed or self.failed)

    def log_fields(self) -> dict[str, Any]:
        """Counts, and the next wake-up."""
        return {
            "enqueued": len(self.enqueued),
            "skipped": len(self.skipped),
            "missed": sum(self.missed.values()),
            "conflicts": self.conflicts,
            "failed": len(self.failed),
            "schedules": self.schedules,
            "next_wake": self.next_wake.isoformat() if self.next_wake else "none",
        }


class Ticker(Service[TickResult]):
    """Enqueue due slots of every enabled schedule; sleep until the next one."""

    name = "scheduler"

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        scheduler_id: str,
        grace_s: float = GRACE_DEFAULT_S,
        max_sleep_s: float = MAX_SLEEP_DEFAULT_S,
        reconnect_max_s: float = RECONNECT_MAX_DEFAULT_S,
        runs_keep_s: float = RUNS_KEEP_DEFAULT_S,
        now: Now = utc_now,
        timing: Timing = REAL_TIMING,
        outage: OutageProbe | None = None,
        factories: Callable[[ScheduleSpec], WorkflowFactory | None] = schedule_registry.factory,
    ) -> None:
        super().__init__(
            interval_s=max_sleep_s,
            stagger_s=0.0,
            timing=timing,
            logger=log,
            error_backoff=reconnect_backoff(RECONNECT_BASE_S, reconnect_max_s),
            outage=outage if outage is not None else OutageProbe(dsn),
        )
        self.schema = schema
        self.scheduler_id = scheduler_id
        self.grace = timedelta(seconds=grace_s)
        self.reconnect_max_s = reconnect_max_s
        self.runs_keep = timedelta(seconds=runs_keep_s)
        self.now = now
        self.db = LazyConnection(dsn, application_name="queue-scheduler", **KEEPALIVE_KWARGS)
        self.last_loop_at: float | None = None  # monotonic; read by the watchdog heartbeat
        self._run_started = 0.0
        self._last_prune: float | None = None
        self._broken: frozenset[str] = frozenset()
        #: The workflow factories of this process's app (None: not declared here).
        self.factories = factories
        self._unavailable: frozenset[str] = frozenset()

    # -- one run ---------------------------------------------------------------

    def run_once(self, now: datetime | None = None) -> TickResult:
        """Act on every due slot as of ``now`` (default: the clock) and say when to wake."""
        self._run_started = self.timing.clock()
        self.last_loop_at = self._run_started
        at = (now if now is not None else self.now()).astimezone(UTC)
        result = TickResult()
        with self.db.session() as conn:
            rows, broken = store.list_rows(conn, self.schema)
            self._report_broken(broken)
            rows = self._runnable(rows)
            for row in rows:
                if not row.spec.enabled:
                    continue
                result.schedules += 1
                trigger = row.spec.trigger
                checked = row.checked_until.astimezone(UTC)
                upcoming = trigger.next_after(checked)
                if upcoming is not None and upcoming.astimezone(UTC) <= at:
                    try:
                        self._act(conn, row.name, at, result)
                    except RECONNECT_ERRORS:
                        raise  # connection trouble, or a read-only server: the whole run backs off
                    except (psycopg.Error, QueueEngineError) as exc:
                        # One broken schedule (rolled back) must not hold up the others.
                        result.failed.append(row.name)
                        log_event(
                            log,
                            logging.ERROR,
                            "scheduler.schedule_failed",
                            schedule=row.name,
                            error=f"{type(exc).__name__}: {first_line(exc)}",
                        )
                wake = trigger.next_after(max(checked, at))
                if wake is not None:
                    wake = wake.astimezone(UTC)
                    if result.next_wake is None or wake < result.next_wake:
                        result.next_wake = wake
            self._maybe_prune(conn, at)
        self.last_loop_at = self.timing.clock()
        return result

    def _act(
        self, conn: psycopg.Connection[Any], name: str, now: datetime, result: TickResult
    ) -> None:
        """Settle the due slots of one schedule in one transaction, under its row lock."""
        with conn.transaction():
            locked = store.lock(conn, self.schema, name)
            if locked is None or not locked.spec.enabled:
                return  # removed or disabled meanwhile
            spec = locked.spec
            plan = plan_slots(
                spec.trigger, locked.checked_until, now, catchup=spec.catchup, grace=self.grace
            )
            if plan.missed:
                result.missed[name] = plan.missed
                log_event(
                    log,
                    logging.WARNING,
                    "scheduler.missed",
                    schedule=name,
                    missed=f"{plan.missed}{'+' if plan.missed_more else ''}",
                    first=_iso(plan.first_missed),
                    last=_iso(plan.last_missed),
                    catchup=spec.catchup,
                )
            factory = self.factories(spec) if spec.starts_workflow else None
            if spec.starts_workflow and factory is None:
                return  # changed meanwhile to a factory this app does not declare
            active = locked.previous_active
            for slot in plan.fire:
                outcome = "skipped" if spec.overlap == "skip" and active else "enqueued"
                if not store.claim_slot(conn, self.schema, name, slot, outcome, self.scheduler_id):
                    result.conflicts += 1
                    continue
                if outcome == "skipped":
                    result.skipped.append(Fired(name, slot, None))
                    log_event(
                        log,
                        logging.INFO,
                        "scheduler.skipped",
                        schedule=name,
                        slot=_iso(slot),
                        reason="overlap",
                    )
                    continue
                active = True
                if factory is not None:
                    workflow_id, created = store.start_workflow(
                        conn, self.schema, spec, slot, factory, producer="queue-scheduler"
                    )
                    result.enqueued.append(Fired(name, slot, None, workflow_id))
                    log_event(
                        log,
                        logging.INFO,
                        "scheduler.workflow_started",
                        schedule=name,
                        slot=_iso(slot),
                        workflow_id=workflow_id,
                        factory=spec.workflow,
                        created=created,
                    )
                    continue
                job_id = store.enqueue(
                    conn, self.schema, spec, slot, reason="schedule", producer="queue-scheduler"
                )
                result.enqueued.append(Fired(name, slot, job_id))
                log_event(
                    log,
                    logging.INFO,
                    "scheduler.enqueued",
                    schedule=name,
                    slot=_iso(slot),
                    job_id=job_id,
                    task=spec.task,
                    queue=spec.queue,
                )
            if plan.through is not None:
                store.advance(conn, self.schema, name, plan.through)

    def _runnable(self, rows: list[store.ScheduleRow]) -> list[store.ScheduleRow]:
        """Leave out workflow schedules whose factory this process lacks (said once each).

        Their slots are for the scheduler whose app declares the factory; acting
        on them here would either fail every slot or, worse, settle it unstarted.
        """
        kept: list[store.ScheduleRow] = []
        unavailable: set[str] = set()
        for row in rows:
            if row.spec.starts_workflow and self.factories(row.spec) is None:
                unavailable.add(row.name)
                if row.name not in self._unavailable and row.spec.enabled:
                    log_event(
                        log,
                        logging.WARNING,
                        "scheduler.workflow_unavailable",
                        schedule=row.name,
                        factory=row.spec.workflow,
                        app=row.app or "none",
                        hint="this scheduler's app does not declare that factory; the slots "
                        "are left to `queue-scheduler --app` of the app that does",
                    )
                continue
            kept.append(row)
        self._unavailable = frozenset(unavailable)
        return kept

    def _report_broken(self, broken: list[str]) -> None:
        current = frozenset(broken)
        for line in sorted(current - self._broken):
            log_event(log, logging.ERROR, "scheduler.invalid_schedule", error=line)
        self._broken = current

    def _maybe_prune(self, conn: psycopg.Connection[Any], now: datetime) -> None:
        mono = self.timing.clock()
        if self._last_prune is not None and mono - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = mono
        pruned = store.prune_runs(conn, self.schema, now - self.runs_keep)
        if pruned:
            log_event(log, logging.DEBUG, "scheduler.pruned", runs=pruned)

    # -- the loop's timing -----------------------------------------------------

    def next_interval(self, result: TickResult | None) -> float:
        """Sleep until the earliest next slot (capped); after an error, a capped backoff."""
        if result is None:
            return super().next_interval(None)
        # The base loop subtracts the run's duration from what we return; the wake-up
        # below is already measured from the wall clock now, so add it back.
        elapsed = self.timing.clock() - self._run_started
        if result.next_wake is None:
            return self.interval_s + elapsed
        until = (result.next_wake - self.now()).total_seconds()
        return min(max(until, 0.0), self.interval_s) + elapsed

    def on_stop(self) -> None:
        """Close the connection when the loop ends."""
        self.db.reset()


def _iso(value: datetime | None) -> str:
    return "none" if value is None else value.isoformat()


# -- change notifications ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListenResult:
    """One wait for notifications."""

    notifications: int

    @property
    def did_work(self) -> bool:
        """Never info: a schedule change is logged by the command that made it."""
        return False

    def log_fields(self) -> dict[str, Any]:
        """How many notifications arrived."""
        return {"notifications": self.notifications}


class ScheduleListener(Service[ListenResult]):
    """LISTEN on ``<schema>.schedules`` and wake the ticker when a schedule changes.

    Runs on its own connection so the ticker's transactions never delay a
    wake-up. After a reconnect it wakes the ticker too: notifications sent
    while it was disconnected are lost.
    """

    name = "scheduler_listener"

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        on_change: Callable[[], None],
        wait_s: float = 1.0,
        reconnect_max_s: float = RECONNECT_MAX_DEFAULT_S,
        timing: Timing = REAL_TIMING,
        outage: OutageProbe | None = None,
    ) -> None:
        super().__init__(
            interval_s=wait_s,
            stagger_s=0.0,
            timing=timing,
            logger=log,
            error_backoff=reconnect_backoff(RECONNECT_BASE_S, reconnect_max_s),
            outage=outage if outage is not None else OutageProbe(dsn),
        )
        self.channel = store.schedules_channel(schema)
        self.on_change = on_change
        self.wait_s = wait_s
        self.reconnect_max_s = reconnect_max_s
        self.db = LazyConnection(dsn, application_name="queue-scheduler", **KEEPALIVE_KWARGS)

    def run_once(self) -> ListenResult:
        """Wait up to ``wait_s`` for notifications; wake the ticker if any came."""
        fresh = not self.db.is_open
        with self.db.session() as conn:
            if fresh:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self.on_change()
            count = sum(1 for _ in conn.notifies(timeout=self.wait_s, stop_after=1))
            if count:
                # Drain what else is queued, then wake once.
                count += sum(1 for _ in conn.notifies(timeout=0))
                self.on_change()
        return ListenResult(count)

    def next_interval(self, result: ListenResult | None) -> float:
        """Listen again at once; after an error, a capped backoff."""
        if result is None:
            return super().next_interval(None)
        return 0.0

    def on_stop(self) -> None:
        """Close the connection when the loop ends."""
        self.db.reset()
