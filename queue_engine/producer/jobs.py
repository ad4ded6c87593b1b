"""The job record, its statuses and the allowed transitions, as data.

The same transition table is installed in the database (``job_transitions``),
where a trigger refuses any other status change; ``tests`` check the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from typing import Any


class JobStatus(StrEnum):
    """Where a job is in its life."""

    #: A workflow node whose parents have not all ended, or an input node awaiting its value.
    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"
    LOST = "lost"
    #: Final: the handler skipped the node, or a skipped parent's edge said so.
    SKIPPED = "skipped"


ACTIVE_STATUSES = frozenset({JobStatus.WAITING, JobStatus.QUEUED, JobStatus.RUNNING})
FINISHED_STATUSES = frozenset(
    {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED, JobStatus.LOST, JobStatus.SKIPPED}
)
RETRYABLE_STATUSES = frozenset(
    {JobStatus.FAILED, JobStatus.CANCELED, JobStatus.LOST, JobStatus.SKIPPED}
)

ALLOWED_TRANSITIONS: frozenset[tuple[JobStatus, JobStatus]] = frozenset(
    {
        (JobStatus.QUEUED, JobStatus.RUNNING),
        (JobStatus.QUEUED, JobStatus.CANCELED),
        (JobStatus.RUNNING, JobStatus.SUCCEEDED),
        (JobStatus.RUNNING, JobStatus.FAILED),
        (JobStatus.RUNNING, JobStatus.QUEUED),
        (JobStatus.RUNNING, JobStatus.CANCELED),
        (JobStatus.RUNNING, JobStatus.LOST),
        (JobStatus.FAILED, JobStatus.QUEUED),
        (JobStatus.CANCELED, JobStatus.QUEUED),
        (JobStatus.LOST, JobStatus.QUEUED),
        # Workflows (migration 0007).
        (JobStatus.WAITING, JobStatus.QUEUED),
        (JobStatus.WAITING, JobStatus.CANCELED),
        (JobStatus.WAITING, JobStatus.SKIPPED),
        (JobStatus.WAITING, JobStatus.SUCCEEDED),
        (JobStatus.WAITING, JobStatus.FAILED),
        (JobStatus.RUNNING, JobStatus.SKIPPED),
        (JobStatus.SKIPPED, JobStatus.QUEUED),
        (JobStatus.FAILED, JobStatus.WAITING),
        (JobStatus.CANCELED, JobStatus.WAITING),
        (JobStatus.LOST, JobStatus.WAITING),
        (JobStatus.SKIPPED, JobStatus.WAITING),
        # A node handed over by its last parent's finish (migration 0009).
        (JobStatus.WAITING, JobStatus.RUNNING),
    }
)


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of one job row; ``created`` tells whether the enqueue inserted it."""

    id: int
    queue: str
    task: str
    args: dict[str, Any]
    status: JobStatus
    priority: int
    available_at: datetime
    attempt: int
    max_attempts: int
    lease_ttl_s: int | None
    lease_expires_at: datetime | None
    heartbeat_at: datetime | None
    claimed_by: str | None
    timeout_s: int | None
    idempotency_key: str | None
    dedupe_key: str | None
    lock_key: str | None
    partition_key: str | None
    producer: str | None
    cancel_requested: bool
    progress: Any
    result: Any
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    created: bool = False
    #: The warm state the job asked for (``enqueue(affinity_key=...)``). Last and
    #: defaulted so rows of a database not yet migrated to 0004, which lack the
    #: column, still load.
    affinity_key: str | None = None
    #: The workflow this job is a node of, and the node's name (migration 0007).
    workflow_id: int | None = None
    node: str | None = None
    #: While ``waiting``: parents (or gates of parents) still to end well.
    pending_parents: int | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Job:
        """Build a Job from a ``dict_row``; unknown columns (newer schema) are ignored."""
        values = {f.name: row[f.name] for f in fields(cls) if f.name in row}
        values["status"] = JobStatus(values["status"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (datetimes as ISO 8601 strings)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        out["status"] = str(self.status)
        return out
