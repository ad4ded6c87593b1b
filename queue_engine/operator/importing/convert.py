"""How a row of a replaced system becomes a job of this engine: pure rules, no I/O.

``queue-ctl import`` reads dataloader's ``dl_jobs``, pqrun's ``jobs`` and
queue_workflows' ``ingest_jobs`` with plain SELECTs; each row comes here as a
mapping of its columns and leaves as an :class:`ImportJob` (the values of one
row of ``import_jobs.sql``) or as a :class:`Refusal` naming why it cannot be
moved unchanged. Nothing is truncated or renamed to make a row fit: a job
whose task name this engine refuses is reported with its old id, so that the
operator decides, rather than arriving as a different job.

The rules a reader must know, and the guide repeats:

- **Attempts.** All three systems count an attempt when a worker claims the
  job and never give it back when the lease runs out (pqrun's reaper,
  dataloader's reaper and queue_workflows' lease reclaim put the row back to
  ready with its count). So an attempt that was running when the old system
  stopped is spent here too: a running job arrives queued with its count.
  Those systems still run a reaped job whose count reached its limit once
  more, so such a job gets ``max_attempts = attempt + 1``: one last run.
- **Priority.** pqrun runs higher first (any int, default 0); this engine
  runs lower first, 0..1000, default 100: :func:`pqrun_priority`.
  dataloader already runs lower first with default 100: kept, clamped.
- **Delay.** ``run_after`` / ``available_at`` are kept: a delayed job waits
  for the same moment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.compat import priority_from_pqrun
from queue_engine.producer.validation import check_queue_name, check_task_name

#: The engine's bounds (migration 0001's checks, kept by the row rules).
PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = 0, 1000, 100
MAX_ATTEMPTS_MAX = 1000
TIMEOUT_MAX_S = 604_800
LEASE_TTL_MAX_S = 86_400
KEY_MAX = 255

#: What ``queue-ctl import --from pqrun`` prints about the priority conversion.
PQRUN_PRIORITY_RULE = (
    "priority: pqrun runs higher first (default 0), this engine lower first (0..1000, "
    "default 100); engine = clamp(100 - pqrun, 0, 1000): 0 -> 100, 10 -> 90, -5 -> 105, "
    "100 and above -> 0, -900 and below -> 1000 (order kept from -900 to 100; beyond, ties)"
)


def pqrun_priority(priority: int) -> int:
    """Convert pqrun's priority (higher first, default 0) to this engine's (lower first).

    ``100 - p``, clamped to 0..1000: order-preserving (a higher pqrun priority
    never runs later here), pqrun's default 0 lands on this engine's default
    100, so imported jobs and new ones of a task mix as they did, and the
    common small range (-10..10) keeps its distinctions. Values beyond
    -900..100 tie at the ends; the importer counts them. The one formula is
    :func:`queue_engine.producer.compat.priority_from_pqrun`, which users'
    code calls too.
    """
    return priority_from_pqrun(int(priority))


def pqrun_priority_clamped(priority: int) -> bool:
    """True when :func:`pqrun_priority` had to clamp (the value ties with others)."""
    return not PRIORITY_MIN <= PRIORITY_DEFAULT - int(priority) <= PRIORITY_MAX


@dataclass(frozen=True)
class ImportJob:
    """One job to write: the values of one row of ``import_jobs.sql``.

    ``None`` for queue, priority or max_attempts lets the task's defaults
    apply (migration 0028), as an enqueue that leaves them out.
    """

    old_id: str
    status: str  # the row's status in the old system, for the report
    task: str
    args: str  # a JSON object, as text
    available_at: datetime | None
    attempt: int
    created_at: datetime | None
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    timeout_s: int | None = None
    lease_ttl_s: int | None = None
    idempotency_key: str | None = None
    dedupe_key: str | None = None
    lock_key: str | None = None
    partition_key: str | None = None
    producer: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Refusal:
    """A row that cannot be moved unchanged: its old id and why."""

    old_id: str
    status: str
    reason: str


def _key(name: str, value: Any) -> str | None:
    """A key column: empty means none (dataloader's partition_key defaults to '')."""
    if value is None or value == "":
        return None
    text = str(value)
    if len(text) > KEY_MAX:
        raise ValidationError(f"{name} is longer than {KEY_MAX} characters")
    return text


def _args(value: Any) -> str:
    if not isinstance(value, dict):
        raise ValidationError(
            f"its arguments are a JSON {type(value).__name__}, not an object (this engine's "
            "args are always an object)"
        )
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _bounded(value: Any, high: int) -> int | None:
    """A positive bound (seconds): none when absent or not positive, else at most ``high``."""
    if value is None or int(value) <= 0:
        return None
    return min(int(value), high)


def attempts_of(attempts: Any, max_attempts: Any) -> tuple[int, int | None]:
    """The attempt count kept and the limit that still allows one more run.

    A running job's attempt is spent (see the module's docstring); a job that
    spent all of them gets one last run, as the old systems' reapers give it.
    """
    spent = max(0, min(int(attempts or 0), MAX_ATTEMPTS_MAX - 1))
    if max_attempts is None:
        return spent, None
    limit = max(1, min(int(max_attempts), MAX_ATTEMPTS_MAX))
    return spent, max(limit, spent + 1)


def _common(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"old_id": str(row["old_id"]), "status": str(row["status"])}


def from_pqrun(row: Mapping[str, Any]) -> ImportJob | Refusal:
    """One row of pqrun's ``jobs`` (READY or RUNNING) as a job of this engine.

    job_type is the task, payload the args, run_after the time it is due,
    timeout_seconds (pqrun's per-job stale threshold: how long a run may
    take) the timeout; the queue is the task's default (pqrun has none).
    """
    try:
        attempt, max_attempts = attempts_of(row["attempts"], row["max_attempts"])
        return ImportJob(
            **_common(row),
            task=check_task_name(row["task"]),
            args=_args(row["args"]),
            priority=pqrun_priority(row["priority"]),
            available_at=row["run_after"],
            attempt=attempt,
            max_attempts=max_attempts,
            timeout_s=_bounded(row["timeout_seconds"], TIMEOUT_MAX_S),
            dedupe_key=_key("dedupe_key", row["dedupe_key"]),
            error=row["last_error"],
            created_at=row["created_at"],
        )
    except (ValidationError, TypeError, ValueError) as exc:
        return Refusal(**_common(row), reason=str(exc))


def from_dataloader(row: Mapping[str, Any]) -> ImportJob | Refusal:
    """One row of dataloader's ``dl_jobs`` (queued or running) as a job of this engine.

    Every field has its namesake here (lease_ttl_sec is lease_ttl_s);
    consumer_group has none on this engine's jobs table and is not carried.
    """
    try:
        attempt, max_attempts = attempts_of(row["attempt"], row["max_attempts"])
        return ImportJob(
            **_common(row),
            queue=check_queue_name(row["queue"]),
            task=check_task_name(row["task"]),
            args=_args(row["args"]),
            priority=max(PRIORITY_MIN, min(PRIORITY_MAX, int(row["priority"]))),
            available_at=row["available_at"],
            attempt=attempt,
            max_attempts=max_attempts,
            lease_ttl_s=_bounded(row["lease_ttl_sec"], LEASE_TTL_MAX_S),
            idempotency_key=_key("idempotency_key", row["idempotency_key"]),
            lock_key=_key("lock_key", row["lock_key"]),
            partition_key=_key("partition_key", row["partition_key"]),
            producer=_key("producer", row["producer"]),
            error=row["error"],
            created_at=row["created_at"],
        )
    except (ValidationError, TypeError, ValueError) as exc:
        return Refusal(**_common(row), reason=str(exc))


def from_queue_workflows_ingest(row: Mapping[str, Any]) -> ImportJob | Refusal:
    """One row of queue_workflows' ``ingest_jobs`` (queued or running) as a job here.

    task_name is the task, on the same queue; the ingest ``reason`` is not
    carried (this engine's handlers take ``(args, ctx)``).
    """
    try:
        attempt, max_attempts = attempts_of(row["attempts"], row["max_attempts"])
        return ImportJob(
            **_common(row),
            queue=check_queue_name(row["queue"]),
            task=check_task_name(row["task"]),
            args=_args(row["args"]),
            available_at=row["available_at"],
            attempt=attempt,
            max_attempts=max_attempts,
            error=row["error"],
            created_at=row["created_at"],
        )
    except (ValidationError, TypeError, ValueError) as exc:
        return Refusal(**_common(row), reason=str(exc))


def batch_params(source: str, jobs: list[ImportJob]) -> dict[str, Any]:
    """The parameters of ``import_jobs.sql`` for one batch (one array per column)."""
    columns = (
        "old_id",
        "queue",
        "task",
        "args",
        "priority",
        "available_at",
        "attempt",
        "max_attempts",
        "timeout_s",
        "lease_ttl_s",
        "idempotency_key",
        "dedupe_key",
        "lock_key",
        "partition_key",
        "producer",
        "error",
        "created_at",
    )
    params: dict[str, Any] = {name: [getattr(j, name) for j in jobs] for name in columns}
    params["source"] = source
    return params
