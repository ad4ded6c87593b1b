"""What a workflow and its nodes look like when read back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class WorkflowState(StrEnum):
    """A workflow's state, kept on its row by the statements that end its nodes."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"


#: The per-state counts a workflow row carries (sums of its tally shards).
COUNT_NAMES = ("unfinished", "succeeded", "failed", "canceled", "lost", "skipped")


@dataclass(frozen=True, slots=True)
class WorkflowInfo:
    """One workflow's row and its node counts; ``created`` is False for an idempotent repeat."""

    id: int
    name: str
    state: WorkflowState
    node_count: int
    counts: dict[str, int]
    idempotency_key: str | None
    producer: str | None
    schedule: str | None
    cancel_requested: bool
    created_at: datetime
    finished_at: datetime | None
    created: bool = False

    @classmethod
    def from_row(cls, row: dict[str, Any], *, created: bool = False) -> WorkflowInfo:
        """Build from a ``get_workflow``/``list_workflows`` row."""
        return cls(
            id=row["id"],
            name=row["name"],
            state=WorkflowState(row["state"]),
            node_count=row["node_count"],
            counts={name: int(row[name] or 0) for name in COUNT_NAMES},
            idempotency_key=row["idempotency_key"],
            producer=row["producer"],
            schedule=row["schedule"],
            cancel_requested=row["cancel_requested"],
            created_at=row["created_at"],
            finished_at=row["finished_at"],
            created=created,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO 8601)."""
        return {
            "id": self.id,
            "name": self.name,
            "state": str(self.state),
            "node_count": self.node_count,
            "counts": dict(self.counts),
            "idempotency_key": self.idempotency_key,
            "producer": self.producer,
            "schedule": self.schedule,
            "cancel_requested": self.cancel_requested,
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of a workflow: its job's state and its edges (for ``show``)."""

    job_id: int
    node: str
    task: str
    queue: str
    status: str
    attempt: int
    max_attempts: int
    pending_parents: int | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    error: str | None
    result: Any
    after: list[tuple[str, str]]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> NodeInfo:
        """Build from a ``workflow_nodes`` row."""
        return cls(
            job_id=row["id"],
            node=row["node"],
            task=row["task"],
            queue=row["queue"],
            status=row["status"],
            attempt=row["attempt"],
            max_attempts=row["max_attempts"],
            pending_parents=row["pending_parents"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            duration_ms=row["duration_ms"],
            error=row["error"],
            result=row["result"],
            after=[(a["node"], a["requires"]) for a in (row["after"] or [])],
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "job_id": self.job_id,
            "node": self.node,
            "task": self.task,
            "queue": self.queue,
            "status": self.status,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "pending_parents": self.pending_parents,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "duration_ms": self.duration_ms,
            "error": self.error,
            "result": self.result,
            "after": [{"node": n, "requires": r} for n, r in self.after],
        }
