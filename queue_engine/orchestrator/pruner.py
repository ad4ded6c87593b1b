"""Retention: the leader deletes old finished jobs, their events, and old worker rows.

Without it the jobs table only grows: every index and every vacuum pays for
jobs nobody will look at again, and an ``idempotency_key`` is kept exactly as
long as its job. The pruner (leader only, like the reaper) deletes, per
status, jobs that finished longer ago than that status's retention:

=========================  ==================================  =========
status                     setting                             default
=========================  ==================================  =========
succeeded                  ``QUEUE_ENGINE_RETAIN_SUCCEEDED_S``  7 days
failed                     ``QUEUE_ENGINE_RETAIN_FAILED_S``     30 days
lost                       ``QUEUE_ENGINE_RETAIN_LOST_S``       30 days
canceled                   ``QUEUE_ENGINE_RETAIN_CANCELED_S``   30 days
worker rows (last beat)    ``QUEUE_ENGINE_RETAIN_WORKERS_S``    1 day
audit of controls          ``..._RETAIN_CONTROL_EVENTS_S``      90 days
=========================  ==================================  =========

A retention of 0 keeps that status forever. Queued and running jobs are never
touched (only rows with ``finished_at`` set and a final status qualify).

Succeeded jobs the archiver moved to ``jobs_archive`` (migration 0027) are
deleted from there after the same ``RETAIN_SUCCEEDED_S``, in batches of
their own (``sql/prune_jobs.sql`` on that table).

Workflow nodes are never pruned one by one: a node of a running workflow is
still read by its children (its result, its edges), so ``sql/prune_jobs.sql``
skips every job with a ``workflow_id``. A *finished* workflow goes as a whole
(``sql/prune_workflows.sql``: its row, tallies, jobs, their events, edges and
gates, in one statement) once it finished longer ago than the retention of
its final state: succeeded → ``RETAIN_SUCCEEDED_S``, failed →
``RETAIN_FAILED_S``, canceled → ``RETAIN_CANCELED_S``. Its batches are bounded
in jobs too (whole workflows while their nodes add up to ``batch_size``, at
least one), so one huge workflow is one statement of its own.

Each statement (``sql/prune_jobs.sql``) deletes at most ``batch_size`` jobs and
their events, oldest first through ``jobs_finished_at_idx``, skipping rows
someone else has locked; each is its own short transaction, so no lock is held
for long and replication lag stays small. A run takes at most ``max_batches``
batches, alternating between the retention groups; when it stops because of
that bound with work left, the next run comes after ``catch_up_s`` instead of
the full interval, so a backlog is worked off in short bites.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Unpack

import psycopg
from psycopg import sql

from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.sweep import (
    CATCH_UP_DEFAULT_S,
    BacklogSweep,
    SweepOptions,
    run_batches,
)
from queue_engine.producer.jobs import JobStatus

#: Default retention per final status (seconds), from the settings table.
RETAIN_DEFAULTS_S: dict[JobStatus, float] = {
    JobStatus.SUCCEEDED: table.RETAIN_SUCCEEDED_S.default,
    JobStatus.FAILED: table.RETAIN_FAILED_S.default,
    JobStatus.LOST: table.RETAIN_LOST_S.default,
    JobStatus.CANCELED: table.RETAIN_CANCELED_S.default,
}
#: Worker rows whose last heartbeat is older than this are deleted.
RETAIN_WORKERS_DEFAULT_S = table.RETAIN_WORKERS_S.default
#: Rows of the audit of controls (``control_events``, migration 0034) older than this go.
RETAIN_CONTROL_EVENTS_DEFAULT_S = table.RETAIN_CONTROL_EVENTS_S.default
#: How often the leader prunes (seconds); ``QUEUE_ENGINE_PRUNE_S``.
PRUNE_INTERVAL_DEFAULT_S = table.PRUNE_S.default
#: Jobs deleted per statement.
BATCH_SIZE_DEFAULT = 1000
#: Statements per run, over all retention groups.
MAX_BATCHES_DEFAULT = 20

log = logging.getLogger("queue_engine.pruner")


@dataclass(frozen=True, slots=True)
class Retention:
    """How long each final status (and a worker row) is kept; 0 keeps it forever."""

    succeeded_s: float = RETAIN_DEFAULTS_S[JobStatus.SUCCEEDED]
    failed_s: float = RETAIN_DEFAULTS_S[JobStatus.FAILED]
    lost_s: float = RETAIN_DEFAULTS_S[JobStatus.LOST]
    canceled_s: float = RETAIN_DEFAULTS_S[JobStatus.CANCELED]
    workers_s: float = RETAIN_WORKERS_DEFAULT_S
    control_events_s: float = RETAIN_CONTROL_EVENTS_DEFAULT_S

    @classmethod
    def from_env(cls) -> Retention:
        """Read ``QUEUE_ENGINE_RETAIN_<STATUS>_S`` and ``..._WORKERS_S`` (:mod:`queue_engine.foundation.settings`)."""
        return cls(
            succeeded_s=table.RETAIN_SUCCEEDED_S.read(),
            failed_s=table.RETAIN_FAILED_S.read(),
            lost_s=table.RETAIN_LOST_S.read(),
            canceled_s=table.RETAIN_CANCELED_S.read(),
            workers_s=table.RETAIN_WORKERS_S.read(),
            control_events_s=table.RETAIN_CONTROL_EVENTS_S.read(),
        )

    @classmethod
    def uniform(cls, seconds: float, workers_s: float = RETAIN_WORKERS_DEFAULT_S) -> Retention:
        """The same retention for every final status (``queue-ctl prune --older-than``)."""
        return cls(
            seconds, seconds, seconds, seconds, workers_s, table.RETAIN_CONTROL_EVENTS_S.read()
        )

    def groups(self) -> list[tuple[float, list[str]]]:
        """Statuses grouped by retention (one statement per group), shortest first; 0 left out."""
        by_age: dict[float, list[str]] = {}
        for status, seconds in (
            (JobStatus.SUCCEEDED, self.succeeded_s),
            (JobStatus.FAILED, self.failed_s),
            (JobStatus.LOST, self.lost_s),
            (JobStatus.CANCELED, self.canceled_s),
        ):
            if seconds > 0:
                by_age.setdefault(seconds, []).append(str(status))
        return sorted(by_age.items())

    def workflow_groups(self) -> list[tuple[float, list[str]]]:
        """Workflow final states grouped by retention (the same settings as their jobs').

        A workflow ends succeeded, failed or canceled (a lost node makes it
        failed), so ``lost_s`` does not apply to workflows.
        """
        by_age: dict[float, list[str]] = {}
        for state, seconds in (
            ("succeeded", self.succeeded_s),
            ("failed", self.failed_s),
            ("canceled", self.canceled_s),
        ):
            if seconds > 0:
                by_age.setdefault(seconds, []).append(state)
        return sorted(by_age.items())


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What one pruner run did (or, in a dry run, would do)."""

    jobs: dict[str, int] = field(default_factory=dict)
    events: int = 0
    workers: int = 0
    #: Rows of the audit of controls past their retention.
    control_events: int = 0
    #: Finished workflows deleted as a whole, by final state, and the jobs (nodes) they held.
    workflows: dict[str, int] = field(default_factory=dict)
    workflow_jobs: int = 0
    batches: int = 0
    #: True when the run stopped at ``max_batches`` with rows left to delete.
    more: bool = False
    dry_run: bool = False

    @property
    def jobs_total(self) -> int:
        """Jobs deleted over all statuses."""
        return sum(self.jobs.values())

    @property
    def workflows_total(self) -> int:
        """Workflows deleted over all final states."""
        return sum(self.workflows.values())

    @property
    def did_work(self) -> bool:
        """True when something was (or would be) deleted."""
        return bool(
            self.jobs_total
            or self.events
            or self.workers
            or self.workflows_total
            or self.control_events
        )

    def log_fields(self) -> dict[str, Any]:
        """Counts per kind of row and the number of statements."""
        return {
            "jobs": self.jobs_total,
            **{f"jobs_{k}": v for k, v in sorted(self.jobs.items())},
            "workflows": self.workflows_total,
            **{f"workflows_{k}": v for k, v in sorted(self.workflows.items())},
            "workflow_jobs": self.workflow_jobs,
            "events": self.events,
            "workers": self.workers,
            "control_events": self.control_events,
            "batches": self.batches,
            "more": self.more,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counts (``queue-ctl prune --json``)."""
        return {
            "dry_run": self.dry_run,
            "jobs": self.jobs_total,
            "jobs_by_status": dict(sorted(self.jobs.items())),
            "workflows": self.workflows_total,
            "workflows_by_state": dict(sorted(self.workflows.items())),
            "workflow_jobs": self.workflow_jobs,
            "events": self.events,
            "workers": self.workers,
            "control_events": self.control_events,
            "batches": self.batches,
            "more": self.more,
        }


def _cutoff(conn: psycopg.Connection[Any], now: datetime | None, seconds: float) -> datetime:
    """``now - seconds``, with now the database clock unless pinned."""
    if now is not None:
        return now - timedelta(seconds=seconds)
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    base: datetime = row[0]
    return base - timedelta(seconds=seconds)


def _prune_control_events(
    conn: psycopg.Connection[Any], schema: str, cutoff: datetime, limit: int, dry_run: bool
) -> int:
    """Delete (or count) up to ``limit`` audit rows older than ``cutoff``, oldest first.

    One bounded statement per run: controls are a few rows a day, so a backlog
    of more than ``batch_size`` only follows a first run after a long outage,
    and the next runs take the rest.
    """
    row = conn.execute(
        queries.query("prune_control_events", schema),
        {"cutoff": cutoff, "limit": limit, "dry_run": dry_run},
    ).fetchone()
    assert row is not None
    return int(row[0] if dry_run else row[1])


def prune_once(
    conn: psycopg.Connection[Any],
    schema: str,
    retention: Retention,
    *,
    batch_size: int = BATCH_SIZE_DEFAULT,
    max_batches: int = MAX_BATCHES_DEFAULT,
    now: datetime | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> PruneResult:
    """Delete bounded batches of expired jobs and workflows (round robin over groups), then workers.

    ``conn`` must be in autocommit mode: each batch commits on its own.
    """
    if batch_size < 1 or max_batches < 1:
        raise ValueError("batch_size and max_batches must be >= 1")
    groups: list[dict[str, Any]] = [
        {"kind": "jobs", "cutoff": _cutoff(conn, now, seconds), "statuses": statuses, "after": None}
        for seconds, statuses in retention.groups()
    ] + [
        {
            "kind": "workflows",
            "cutoff": _cutoff(conn, now, seconds),
            "states": states,
            "after": None,
        }
        for seconds, states in retention.workflow_groups()
    ]
    if retention.succeeded_s > 0:
        # Archived jobs (migration 0027) are all succeeded ones.
        groups.append(
            {
                "kind": "archive",
                "cutoff": _cutoff(conn, now, retention.succeeded_s),
                "statuses": [str(JobStatus.SUCCEEDED)],
                "after": None,
            }
        )
    jobs: dict[str, int] = {}
    workflows: dict[str, int] = {}
    events = 0
    workflow_jobs = 0
    #: Groups with rows left, in round-robin order: a batch takes the first and,
    #: if it was full, puts it back at the end.
    pending = deque(range(len(groups)))
    prune_jobs = sql.SQL(queries.query("prune_jobs", schema))
    statements: dict[str, sql.SQL | sql.Composed] = {
        "jobs": prune_jobs.format(table=sql.Identifier("jobs")),
        "archive": prune_jobs.format(table=sql.Identifier("jobs_archive")),
        "workflows": sql.SQL(queries.query("prune_workflows", schema)),
    }

    def batch() -> bool:
        nonlocal events, workflow_jobs
        index = pending.popleft()
        group = groups[index]
        params = {k: v for k, v in group.items() if k != "kind"}
        row = conn.execute(statements[group["kind"]], {**params, "limit": batch_size}).fetchone()
        assert row is not None
        if group["kind"] in ("jobs", "archive"):
            by_status, deleted_events, scanned, last = row
            more = scanned >= batch_size
            for status, n in by_status.items():
                jobs[status] = jobs.get(status, 0) + int(n)
        else:
            by_state, n_jobs, deleted_events, _edges, more, last = row
            workflow_jobs += int(n_jobs)
            for state, n in by_state.items():
                workflows[state] = workflows.get(state, 0) + int(n)
        events += deleted_events
        if last is not None:
            group["after"] = last
        if more:
            pending.append(index)
        return bool(pending)

    batches = run_batches(batch, max_batches=max_batches, stopping=stopping) if pending else 0
    workers_deleted = 0
    if retention.workers_s > 0 and not stopping():
        row = conn.execute(
            queries.query("prune_workers", schema),
            {
                "cutoff": _cutoff(conn, now, retention.workers_s),
                "limit": batch_size,
                "dry_run": False,
            },
        ).fetchone()
        assert row is not None
        workers_deleted = int(row[1])
    control_events = 0
    if retention.control_events_s > 0 and not stopping():
        control_events = _prune_control_events(
            conn, schema, _cutoff(conn, now, retention.control_events_s), batch_size, False
        )
    return PruneResult(
        jobs=jobs,
        events=events,
        workers=workers_deleted,
        control_events=control_events,
        workflows=workflows,
        workflow_jobs=workflow_jobs,
        batches=batches,
        more=bool(pending),
    )


def prune_dry_run(
    conn: psycopg.Connection[Any], schema: str, retention: Retention, *, now: datetime | None = None
) -> PruneResult:
    """Count what a complete prune would delete, changing nothing."""
    jobs: dict[str, int] = {}
    events = 0
    for seconds, statuses in retention.groups():
        rows = conn.execute(
            queries.query("prune_count", schema),
            {"cutoff": _cutoff(conn, now, seconds), "statuses": statuses},
        ).fetchall()
        for status, n, n_events in rows:
            jobs[status] = int(n)
            events += int(n_events)
    workflows: dict[str, int] = {}
    workflow_jobs = 0
    for seconds, states in retention.workflow_groups():
        rows = conn.execute(
            queries.query("prune_workflows_count", schema),
            {"cutoff": _cutoff(conn, now, seconds), "states": states},
        ).fetchall()
        for state, n, n_jobs, n_events in rows:
            workflows[state] = int(n)
            workflow_jobs += int(n_jobs)
            events += int(n_events)
    workers_matched = 0
    if retention.workers_s > 0:
        row = conn.execute(
            queries.query("prune_workers", schema),
            {
                "cutoff": _cutoff(conn, now, retention.workers_s),
                "limit": 1_000_000,
                "dry_run": True,
            },
        ).fetchone()
        assert row is not None
        workers_matched = int(row[0])
    control_events = 0
    if retention.control_events_s > 0:
        cutoff = _cutoff(conn, now, retention.control_events_s)
        control_events = _prune_control_events(conn, schema, cutoff, 1_000_000, True)
    return PruneResult(
        jobs=jobs,
        events=events,
        workers=workers_matched,
        control_events=control_events,
        workflows=workflows,
        workflow_jobs=workflow_jobs,
        dry_run=True,
    )


class Pruner(BacklogSweep[PruneResult]):
    """Leader-only service that enforces retention (start/stop like the reaper)."""

    name = "pruner"
    interval_default_s = PRUNE_INTERVAL_DEFAULT_S
    batch_size_default = BATCH_SIZE_DEFAULT
    max_batches_default = MAX_BATCHES_DEFAULT

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        retention: Retention | None = None,
        catch_up_s: float = CATCH_UP_DEFAULT_S,
        **options: Unpack[SweepOptions],
    ) -> None:
        super().__init__(dsn, schema, catch_up_s=catch_up_s, **options)
        self.retention = retention if retention is not None else Retention.from_env()

    @classmethod
    def from_env(cls, dsn: str, schema: str, **kwargs: Any) -> Pruner:
        """A pruner with ``QUEUE_ENGINE_PRUNE_S`` and the ``RETAIN_*`` settings."""
        kwargs.setdefault("interval_s", table.PRUNE_S.read())
        kwargs.setdefault("retention", Retention.from_env())
        return cls(dsn, schema, **kwargs)

    def run_once(self) -> PruneResult:
        """Delete up to ``max_batches`` batches of expired jobs, then stale worker rows."""
        with self.session() as conn:
            result = prune_once(
                conn,
                self.schema,
                self.retention,
                batch_size=self.batch_size,
                max_batches=self.max_batches,
                now=self.now(),
                stopping=lambda: self.stopping,
            )
        metrics.count("pruned_jobs", result.jobs_total + result.workflow_jobs)
        metrics.count("pruned_workflows", result.workflows_total)
        metrics.count("pruned_events", result.events)
        metrics.count("pruned_workers", result.workers)
        metrics.count("pruned_control_events", result.control_events)
        return result
