"""The client operations, independent of sync or async I/O.

:class:`~queue_engine.client.Client` and :class:`~queue_engine.async_client.AsyncClient`
differ only in how they run a statement; what each operation sends and how it
reads the answer lives here once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

from queue_engine import sql as queries
from queue_engine.errors import InvalidTransition, JobNotFound, QueueEngineError, ValidationError
from queue_engine.jobs import Job, JobStatus
from queue_engine.validation import JobSpec, check_queue_name, spec_from_item

#: How often an enqueue is re-run when its conflicting job is not yet visible.
CONFLICT_RETRIES = 10
LIST_LIMIT_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Statement:
    """A named query and its parameters."""

    query: LiteralString
    params: dict[str, Any]


class EnqueueConflictUnresolved(QueueEngineError):
    """An enqueue conflicted with a job that this transaction can never see."""

    def __init__(self) -> None:
        super().__init__(
            "enqueue conflicted with a job this transaction cannot see; "
            "enqueue under READ COMMITTED or retry the transaction"
        )


def enqueue_statement(schema: str, spec: JobSpec) -> Statement:
    """Return the single-job enqueue statement."""
    return Statement(queries.query("enqueue", schema), spec.params())


def enqueue_many_specs(jobs: Iterable[Any]) -> list[JobSpec]:
    """Validate every item before any is sent, so a bad item writes nothing."""
    if isinstance(jobs, dict | str | bytes):
        raise ValidationError("enqueue_many takes a list of dicts of enqueue options")
    return [spec_from_item(item, index) for index, item in enumerate(jobs)]


def enqueue_many_statement(schema: str, specs: Sequence[JobSpec]) -> Statement:
    """Return the bulk statement: one array per column, one round trip."""
    columns: dict[str, list[Any]] = {
        key: [] for key in (
            "queue", "task", "args", "priority", "run_at", "delay_s", "max_attempts", "timeout_s",
            "lease_ttl_s", "idempotency_key", "dedupe_key", "lock_key", "partition_key", "producer",
        )
    }
    for spec in specs:
        for key, value in spec.params().items():
            columns[key].append(value)
    return Statement(queries.query("enqueue_many", schema), columns)


def job_or_none(row: dict[str, Any] | None) -> Job | None:
    """Turn a ``dict_row`` into a Job."""
    return None if row is None else Job.from_row(row)


def get_statement(schema: str, job_id: int) -> Statement:
    """Return the statement reading one job."""
    return Statement(queries.query("get_job", schema), {"id": _check_id(job_id)})


def cancel_statement(schema: str, job_id: int, message: str) -> Statement:
    """Return the cancel statement (queued → canceled, running → cancel requested)."""
    return Statement(
        queries.query("cancel_job", schema),
        {"id": _check_id(job_id), "message": message, "cancel_channel": queries.cancel_channel(schema)},
    )


def retry_statement(schema: str, job_id: int, message: str) -> Statement:
    """Return the statement putting a finished, unsuccessful job back in its queue."""
    return Statement(
        queries.query("retry_job", schema),
        {"id": _check_id(job_id), "message": message, "jobs_channel": queries.jobs_channel(schema)},
    )


def list_statement(
    schema: str, *, queue: str | None, status: str | None, task: str | None, limit: int
) -> Statement:
    """Return the statement listing jobs newest first."""
    if queue is not None:
        check_queue_name(queue)
    if status is not None:
        try:
            status = str(JobStatus(status))
        except ValueError:
            known = ", ".join(s.value for s in JobStatus)
            raise ValidationError(f"unknown status {status!r}; known: {known}") from None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValidationError(f"limit must be an integer between 1 and {LIST_LIMIT_MAX}")
    return Statement(
        queries.query("list_jobs", schema),
        {"queue": queue, "status": status, "task": task, "limit": limit},
    )


def cancel_refusal(job_id: int, current: Job | None) -> QueueEngineError:
    """Explain why a cancel changed nothing."""
    if current is None:
        return JobNotFound(job_id)
    return InvalidTransition(f"cannot cancel job {job_id}: it already finished ({current.status})")


def retry_refusal(job_id: int, current: Job | None) -> QueueEngineError:
    """Explain why a retry changed nothing."""
    if current is None:
        return JobNotFound(job_id)
    return InvalidTransition(
        f"cannot retry job {job_id}: it is {current.status} "
        "(only failed, canceled or lost jobs can be retried)"
    )


def dedupe_refusal(job_id: int) -> QueueEngineError:
    """Explain a retry refused because its dedupe key is taken by an active job."""
    return InvalidTransition(
        f"cannot retry job {job_id}: another queued or running job holds its dedupe_key"
    )


def _check_id(job_id: Any) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
        raise ValidationError(f"job id must be a positive integer, got {job_id!r}")
    return job_id
