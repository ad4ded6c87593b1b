"""What the dashboard pages read beyond the aggregator's snapshot: jobs, one job, schedules.

Fleet figures (queues, workers) come from :mod:`queue_engine.web.live` and
cost no statement per page view. The reads here are the ones that depend on
what the visitor asked for, and each is bounded: the jobs list is one keyset
page (``sql/dashboard_list_jobs.sql``), a job is a primary-key lookup plus
its events (an index on ``job_id``), a bulk preview counts at most the cap.
The filters are parsed here once, so the page, the preview and the bulk
action can never read them differently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.foundation.errors import QueueEngineError
from queue_engine.operator.audit import ControlEvent, list_control_events
from queue_engine.producer.jobs import Job, JobStatus

#: Rows per page of the jobs list.
PAGE_SIZE = 50
#: Ids a filtered search reads at most per page (the newest below its start):
#: a filter that matches few rows never scans the whole table (bench/web_pages.py).
SEARCH_WINDOW = 100_000
#: Most jobs one bulk action touches (the preview says when more match).
BULK_CAP = 1000
#: Statuses each bulk action accepts.
BULK_STATUSES: dict[str, tuple[str, ...]] = {
    "cancel": ("queued", "running"),
    "retry": ("failed", "canceled", "lost"),
}
STATUSES = tuple(s.value for s in JobStatus)


class FilterError(ValueError):
    """A filter the visitor typed cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class JobFilters:
    """The jobs page's filters, parsed and checked."""

    status: str | None = None
    queue: str | None = None
    task: str | None = None
    workflow: int | None = None
    args: dict[str, Any] | None = None
    args_text: str | None = None
    since: datetime | None = None
    since_text: str | None = None
    until: datetime | None = None
    until_text: str | None = None
    before: int | None = None

    @classmethod
    def parse(cls, form: Mapping[str, str]) -> JobFilters:
        """From query or form fields; empty fields mean "any". Raises :class:`FilterError`."""

        def text(name: str) -> str | None:
            value = (form.get(name) or "").strip()
            return value or None

        status = text("status")
        if status is not None and status not in STATUSES:
            raise FilterError(f"status: {status!r} is not one of {', '.join(STATUSES)}")
        args_text = text("args")
        args = None
        if args_text is not None:
            try:
                args = json.loads(args_text)
            except json.JSONDecodeError as exc:
                raise FilterError(f"arguments: not valid JSON ({exc.msg})") from None
            if not isinstance(args, dict):
                raise FilterError('arguments: give a JSON object, e.g. {"user": 42}')
        return cls(
            status=status,
            queue=text("queue"),
            task=text("task"),
            workflow=_id("workflow", "a workflow id", text("workflow")),
            args=args,
            args_text=args_text,
            since=_moment("created after", text("since")),
            since_text=text("since"),
            until=_moment("created before", text("until")),
            until_text=text("until"),
            before=_id("before", "a job id", text("before")),
        )

    @property
    def any(self) -> bool:
        """True when at least one filter (not the page position) is set."""
        return any(
            v is not None
            for v in (
                self.status,
                self.queue,
                self.task,
                self.workflow,
                self.args,
                self.since,
                self.until,
            )
        )

    @property
    def query_items(self) -> list[tuple[str, str]]:
        """The filters as form fields (without the page position)."""
        pairs = [
            ("status", self.status),
            ("queue", self.queue),
            ("task", self.task),
            ("workflow", None if self.workflow is None else str(self.workflow)),
            ("args", self.args_text),
            ("since", self.since_text),
            ("until", self.until_text),
        ]
        return [(k, v) for k, v in pairs if v is not None]

    @property
    def query(self) -> str:
        """The filters as a query string, for links that keep them."""
        return urlencode(self.query_items)

    def params(self) -> dict[str, Any]:
        """Statement parameters shared by the list and the bulk statements."""
        return {
            "queue": self.queue,
            "status": self.status,
            "task": self.task,
            "workflow": self.workflow,
            "args": None if self.args is None else Jsonb(self.args),
            "since": self.since,
            "until": self.until,
        }


#: The largest id the database holds (bigint): a bigger number is no id at all.
MAX_ID = 2**63 - 1


def _id(label: str, what: str, value: str | None) -> int | None:
    """A positive id typed in a field (``before``, ``workflow``), or None when empty."""
    if value is None:
        return None
    if not value.isdigit() or not 0 < int(value) <= MAX_ID:
        raise FilterError(f"{label}: not {what}")
    return int(value)


def _moment(label: str, value: str | None) -> datetime | None:
    """A ``datetime-local`` field (read as UTC) or an ISO 8601 time."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise FilterError(f"{label}: not a date and time ({value!r})") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class JobRow:
    """One line of the jobs list (the columns ``dashboard_list_jobs`` reads)."""

    id: int
    queue: str
    task: str
    status: str
    priority: int
    attempt: int
    max_attempts: int
    args: dict[str, Any]
    created_at: datetime
    available_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    workflow_id: int | None
    node: str | None
    pending_parents: int | None
    #: Running jobs only (the list draws their bar); None otherwise.
    progress: Any
    #: Failed and lost jobs only: the end of the error (its last line says what was raised).
    error_tail: str | None


@dataclass(frozen=True, slots=True)
class Window:
    """The ids a search reads: ``floor <= id < top`` (``floor`` None: no lower bound)."""

    top: int
    floor: int | None

    @property
    def more_below(self) -> bool:
        """True when older ids exist below the window (the page offers to search on)."""
        return self.floor is not None and self.floor > 1


def search_window(
    conn: psycopg.Connection[Any], schema: str, filters: JobFilters, size: int = SEARCH_WINDOW
) -> Window:
    """Where a search starts (``before``, else past the newest id) and, filtered, where it stops."""
    top = filters.before
    if top is None:
        with schema_errors(schema):
            row = conn.execute(queries.query("dashboard_max_job_id", schema)).fetchone()
        top = (int(row[0]) if row and row[0] is not None else 0) + 1
    floor = max(1, top - size) if filters.any else None
    return Window(top, floor)


def list_jobs(
    conn: psycopg.Connection[Any],
    schema: str,
    filters: JobFilters,
    window: Window,
    limit: int = PAGE_SIZE,
) -> list[JobRow]:
    """One page of jobs inside ``window``, newest first (``limit`` rows at most)."""
    params = filters.params() | {"before": window.top, "floor": window.floor, "limit": limit}
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("dashboard_list_jobs", schema), params)
        return [JobRow(**row) for row in cur.fetchall()]


def bulk_ids(
    conn: psycopg.Connection[Any],
    schema: str,
    filters: JobFilters,
    action: str,
    window: Window,
    limit: int = BULK_CAP,
) -> list[int]:
    """Ids in ``window`` a bulk ``action`` would touch, newest first, at most ``limit``."""
    if action not in BULK_STATUSES:
        raise FilterError(f"action: {action!r} is not one of {', '.join(BULK_STATUSES)}")
    params = filters.params() | {
        "statuses": list(BULK_STATUSES[action]),
        "before": window.top,
        "floor": window.floor if window.floor is not None else 1,
        "limit": limit,
    }
    with schema_errors(schema):
        rows = conn.execute(queries.query("dashboard_bulk_ids", schema), params).fetchall()
    return [int(r[0]) for r in rows]


@dataclass(frozen=True, slots=True)
class BulkPreview:
    """How many jobs a bulk action would touch, before anything is changed."""

    action: str
    count: int
    capped: bool
    cap: int
    window: Window

    @property
    def verb(self) -> str:
        """``cancel`` or ``retry``, for the button."""
        return self.action

    @property
    def done(self) -> str:
        """``canceled`` or ``retried``, for the sentence on the page."""
        return {"cancel": "canceled", "retry": "retried"}[self.action]


def bulk_preview(
    conn: psycopg.Connection[Any],
    schema: str,
    filters: JobFilters,
    action: str,
    window: Window,
    cap: int = BULK_CAP,
) -> BulkPreview:
    """Count the matching jobs, stopping one past the cap (``QUEUE_ENGINE_WEB_BULK_MAX``)."""
    ids = bulk_ids(conn, schema, filters, action, window, limit=cap + 1)
    return BulkPreview(action, min(len(ids), cap), len(ids) > cap, cap, window)


def get_job(conn: psycopg.Connection[Any], schema: str, job_id: int) -> Job | None:
    """One job by id, or None."""
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("get_job", schema), {"id": job_id})
        row = cur.fetchone()
    return None if row is None else Job.from_row(row)


#: Changes of controls the Queues and Limits pages list ("Recent changes").
RECENT_CHANGES = 10


def recent_changes(conn: psycopg.Connection[Any], schema: str) -> list[ControlEvent] | None:
    """The last :data:`RECENT_CHANGES` control changes; None when the audit is not readable.

    A dashboard on a schema older than version 34, or on a role without the
    grant, shows the rest of the page and says why this list is missing.
    """
    try:
        return list_control_events(conn, schema, limit=RECENT_CHANGES)
    except (QueueEngineError, psycopg.errors.InsufficientPrivilege):
        return None
