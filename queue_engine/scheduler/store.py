"""The schedules table: every read and write of schedules, shared by the scheduler and queue-ctl.

Each function runs named statements from ``queue_engine/foundation/sql/schedule_*.sql`` on
a connection the caller owns. Changes an operator makes (add, enable, disable,
remove) NOTIFY ``<schema>.schedules`` in the same transaction, so running
schedulers re-read the table at once instead of at their next poll.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.config import validate_schema
from queue_engine.foundation.errors import QueueEngineError, ValidationError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.producer import operations as ops
from queue_engine.producer.schedules import (
    SCHEDULE_ARG,
    ScheduleSpec,
    WorkflowFactory,
    check_schedule_name,
)
from queue_engine.producer.workflows import Workflow
from queue_engine.producer.workflows import operations as wf_ops

Connection = psycopg.Connection[Any]


class ScheduleNotFound(QueueEngineError, LookupError):
    """No schedule has that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"schedule {name!r} not found (see `queue-ctl schedules list`)")
        self.name = name


class ScheduleExists(QueueEngineError):
    """A schedule with that name exists already."""

    exit_code = ExitCode.FAILURE


def schedules_channel(schema: str) -> str:
    """The NOTIFY channel on which schedule changes announce the schedule's name."""
    return f"{validate_schema(schema)}.schedules"


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A schedule as stored, with the scheduler's bookkeeping."""

    spec: ScheduleSpec
    app: str | None
    checked_until: datetime
    last_slot: datetime | None
    last_job_id: int | None

    @property
    def name(self) -> str:
        """The schedule's name."""
        return self.spec.name

    def next_fire(self, now: datetime) -> datetime | None:
        """The next slot the scheduler will act on, seen from ``now`` (None when disabled)."""
        if not self.spec.enabled:
            return None
        return self.spec.trigger.next_after(
            max(self.checked_until.astimezone(UTC), now.astimezone(UTC))
        )


def spec_from_row(row: dict[str, Any]) -> ScheduleSpec:
    """Build the spec of a stored row (validated again: the table may be edited by hand)."""
    return ScheduleSpec(
        name=row["name"],
        expression=row["expression"],
        task=row["task"],
        tz=row["tz"],
        queue=row["queue"],
        args=dict(row["args"] or {}),
        priority=int(row["priority"]),
        max_attempts=row["max_attempts"],
        timeout_s=row["timeout_s"],
        catchup=int(row["catchup"]),
        overlap=row["overlap"],
        enabled=bool(row["enabled"]),
        source=row.get("source") or "cli",
        workflow=row.get("workflow"),
    )


def _params(spec: ScheduleSpec, app: str | None) -> dict[str, Any]:
    return {
        "name": spec.name,
        "expression": spec.expression,
        "tz": spec.tz,
        "task": spec.task,
        "queue": spec.queue,
        "args": spec.args_json(),
        "priority": spec.priority,
        "max_attempts": spec.max_attempts,
        "timeout_s": spec.timeout_s,
        "catchup": spec.catchup,
        "overlap": spec.overlap,
        "enabled": spec.enabled,
        "source": spec.source,
        "app": app,
        "workflow": spec.workflow,
    }


def _notify(conn: Connection, schema: str, name: str) -> None:
    conn.execute(
        queries.plain("schedule_notify"),
        {"channel": schedules_channel(schema), "name": name},
    )


def list_rows(conn: Connection, schema: str) -> tuple[list[ScheduleRow], list[str]]:
    """Every schedule, by name; rows that no longer validate are returned as error lines."""
    rows: list[ScheduleRow] = []
    broken: list[str] = []
    with conn.cursor(row_factory=dict_row) as cur:
        for row in cur.execute(queries.query("schedule_list", schema)).fetchall():
            try:
                spec = spec_from_row(row)
            except ValidationError as exc:
                broken.append(str(exc))
                continue
            rows.append(
                ScheduleRow(
                    spec=spec,
                    app=row["app"],
                    checked_until=row["checked_until"],
                    last_slot=row["last_slot"],
                    last_job_id=row["last_job_id"],
                )
            )
    return rows, broken


def add(conn: Connection, schema: str, spec: ScheduleSpec, *, replace: bool = False) -> bool:
    """Add a CLI schedule; return True when created, False when ``replace`` changed an existing one.

    A schedule declared in code is never replaced from the command line: the
    next ``queue-scheduler --app`` start would put the code's version back.
    """
    with conn.transaction():
        if replace:
            existing = _source_of(conn, schema, spec.name)
            if existing == "code":
                raise ScheduleExists(
                    f"schedule {spec.name!r} is declared in code (source=code): change it in "
                    "the app, or use `queue-ctl schedules disable`"
                )
            params = {**_params(spec, None), "keep_enabled": False}
            row = conn.execute(queries.query("schedule_upsert", schema), params).fetchone()
            created = bool(row[1]) if row is not None else False
        else:
            row = conn.execute(
                queries.query("schedule_insert", schema), _params(spec, None)
            ).fetchone()
            if row is None:
                raise ScheduleExists(
                    f"schedule {spec.name!r} already exists: pass --replace to change it, "
                    "or remove it first"
                )
            created = True
        _notify(conn, schema, spec.name)
    return created


def _source_of(conn: Connection, schema: str, name: str) -> str | None:
    for row in list_rows(conn, schema)[0]:
        if row.name == name:
            return row.spec.source
    return None


def set_enabled(conn: Connection, schema: str, name: str, enabled: bool) -> str:
    """Enable or disable a schedule; return its source. Raises ScheduleNotFound."""
    check_schedule_name(name)
    with conn.transaction():
        row = conn.execute(
            queries.query("schedule_set_enabled", schema), {"name": name, "enabled": enabled}
        ).fetchone()
        if row is None:
            raise ScheduleNotFound(name)
        _notify(conn, schema, name)
    return str(row[1])


def remove(conn: Connection, schema: str, name: str) -> str:
    """Delete a schedule and its slot records; return its source. Raises ScheduleNotFound."""
    check_schedule_name(name)
    with conn.transaction():
        row = conn.execute(queries.query("schedule_delete", schema), {"name": name}).fetchone()
        if row is None:
            raise ScheduleNotFound(name)
        _notify(conn, schema, name)
    return str(row[1])


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What a code sync changed."""

    created: list[str]
    updated: list[str]
    removed: list[str]


def sync_code(
    conn: Connection, schema: str, specs: Sequence[ScheduleSpec], *, app: str
) -> SyncResult:
    """Upsert the app's code-declared schedules; remove those the app no longer declares.

    Only schedules of the same app are removed, so schedulers of different apps
    (and CLI schedules) never undo each other. Operators' enable/disable is kept.
    """
    created: list[str] = []
    updated: list[str] = []
    with conn.transaction():
        for spec in specs:
            params = {**_params(spec, app), "keep_enabled": True}
            row = conn.execute(queries.query("schedule_upsert", schema), params).fetchone()
            if row is not None:
                (created if row[1] else updated).append(spec.name)
        gone = conn.execute(
            queries.query("schedule_delete_stale_code", schema),
            {"app": app, "names": [s.name for s in specs]},
        ).fetchall()
        removed = [str(r[0]) for r in gone]
        if created or updated or removed:
            _notify(conn, schema, "*")
    return SyncResult(created, updated, removed)


@dataclass(frozen=True, slots=True)
class LockedSchedule:
    """A schedule read under its row lock, with the status of its latest job."""

    spec: ScheduleSpec
    checked_until: datetime
    last_job_status: str | None
    last_workflow_state: str | None = None

    @property
    def previous_active(self) -> bool:
        """True while the schedule's latest job is queued or running, or its latest workflow runs."""
        if self.spec.starts_workflow:
            return self.last_workflow_state == "running"
        return self.last_job_status in ("queued", "running")


def lock(conn: Connection, schema: str, name: str) -> LockedSchedule | None:
    """Lock a schedule row for the current transaction and read it (None: it is gone)."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(queries.query("schedule_lock", schema), {"name": name}).fetchone()
    if row is None:
        return None
    return LockedSchedule(
        spec_from_row(row),
        row["checked_until"],
        row["last_job_status"],
        row["last_workflow_state"],
    )


def claim_slot(
    conn: Connection, schema: str, name: str, slot: datetime, outcome: str, scheduler_id: str
) -> bool:
    """Record a slot as acted on; False when another scheduler already did (nothing written)."""
    row = conn.execute(
        queries.query("schedule_claim_slot", schema),
        {"name": name, "slot": slot, "outcome": outcome, "scheduler_id": scheduler_id},
    ).fetchone()
    return row is not None


def schedule_args(spec: ScheduleSpec, slot: datetime | None, reason: str) -> dict[str, Any]:
    """The job's args: the schedule's, plus why it was enqueued under the reserved key."""
    why: dict[str, Any] = {
        "schedule": spec.name,
        "slot": None if slot is None else slot.isoformat(),
        "reason": reason,
    }
    return {**spec.args, SCHEDULE_ARG: why}


def enqueue(
    conn: Connection,
    schema: str,
    spec: ScheduleSpec,
    slot: datetime | None,
    *,
    reason: str,
    producer: str,
) -> int:
    """Insert the schedule's job (for ``slot``, or a manual run); return its id."""
    job = ops.job_spec(
        spec.task,
        queue=spec.queue,
        args=schedule_args(spec, slot, reason),
        priority=spec.priority,
        max_attempts=spec.max_attempts,
        timeout_s=spec.timeout_s,
        producer=producer,
    )
    row = conn.execute(
        queries.query("schedule_enqueue", schema),
        {
            "name": spec.name,
            "slot": slot,
            "queue": job.queue,
            "task": job.task,
            "args": job.args_json,
            "priority": job.priority,
            "max_attempts": job.max_attempts,
            "timeout_s": job.timeout_s,
            "producer": job.producer,
        },
    ).fetchone()
    assert row is not None
    return int(row[0])


class WorkflowFactoryError(QueueEngineError):
    """A workflow schedule's factory raised or returned something other than a Workflow."""


def slot_idempotency_key(name: str, slot: datetime) -> str:
    """The idempotency key of the workflow a schedule's slot starts: one per (schedule, slot)."""
    return f"schedule:{name}:{slot.astimezone(UTC).isoformat()}"


def start_workflow(
    conn: Connection,
    schema: str,
    spec: ScheduleSpec,
    slot: datetime,
    factory: WorkflowFactory,
    *,
    producer: str,
) -> tuple[int, bool]:
    """Build the slot's workflow, start it and link it to the slot; return (id, created).

    Runs in the caller's transaction, after :func:`claim_slot`: the slot is
    recorded if and only if its workflow exists. The workflow's idempotency key
    is the schedule's and the slot's (:func:`slot_idempotency_key`), whatever
    the factory set, so even a slot record pruned and acted on again could not
    start a second workflow for it.
    """
    try:
        workflow = factory(slot)
    except Exception as exc:
        raise WorkflowFactoryError(
            f"schedule {spec.name!r}: workflow factory {spec.workflow} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(workflow, Workflow):
        raise WorkflowFactoryError(
            f"schedule {spec.name!r}: workflow factory {spec.workflow} returned "
            f"{type(workflow).__name__}, not a Workflow"
        )
    workflow.idempotency_key = slot_idempotency_key(spec.name, slot)
    if workflow.producer is None:
        workflow.producer = producer
    statement = wf_ops.start_statement(schema, workflow, schedule=spec.name)
    row = conn.execute(statement.query, statement.params).fetchone()
    assert row is not None  # start_workflow always answers one row
    workflow_id, created = int(row[0]), bool(row[1])
    conn.execute(
        queries.query("schedule_record_workflow", schema),
        {"name": spec.name, "slot": slot, "workflow_id": workflow_id},
    )
    return workflow_id, created


def advance(conn: Connection, schema: str, name: str, through: datetime) -> None:
    """Mark every slot up to ``through`` settled."""
    conn.execute(queries.query("schedule_advance", schema), {"name": name, "through": through})


def run_now(conn: Connection, schema: str, name: str, *, producer: str = "queue-ctl") -> int:
    """Enqueue one job of the schedule at once (reason "manual", not tied to a slot)."""
    check_schedule_name(name)
    with conn.transaction():
        locked = lock(conn, schema, name)
        if locked is None:
            raise ScheduleNotFound(name)
        if locked.spec.starts_workflow:
            raise ValidationError(
                f"schedule {name!r} starts a workflow built by code ({locked.spec.workflow}), "
                "which `queue-ctl schedules run-now` cannot build: start one with "
                "Client.start_workflow, or let "
                "`queue-scheduler --app` run the schedule"
            )
        return enqueue(conn, schema, locked.spec, None, reason="manual", producer=producer)


def prune_runs(conn: Connection, schema: str, before: datetime, limit: int = 5000) -> int:
    """Delete up to ``limit`` slot records older than ``before``; return how many."""
    cur = conn.execute(
        queries.query("schedule_runs_prune", schema), {"before": before, "limit": limit}
    )
    return cur.rowcount


def describe(row: ScheduleRow, now: datetime) -> dict[str, Any]:
    """A JSON-able view of a schedule for ``queue-ctl schedules list --json``."""
    spec = row.spec
    nxt = row.next_fire(now)
    return {
        "name": spec.name,
        "expression": spec.expression,
        "tz": spec.tz,
        "task": spec.task,
        "queue": spec.queue,
        "args": spec.args,
        "enabled": spec.enabled,
        "source": spec.source,
        "app": row.app,
        "catchup": spec.catchup,
        "overlap": spec.overlap,
        "last_slot": None
        if row.last_slot is None
        else row.last_slot.astimezone(spec.trigger.zone).isoformat(),
        "last_job_id": row.last_job_id,
        "workflow": spec.workflow,
        "next_fire": None if nxt is None else nxt.isoformat(),
    }


def dumps(value: Any) -> str:
    """Compact JSON for args shown in a table."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
