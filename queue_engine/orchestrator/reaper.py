"""The lease reaper: running jobs whose lease expired go back to the queue, or are lost.

A worker stamps ``lease_expires_at`` when it claims a job and its renewer keeps
pushing it forward. When the lease is in the past, nobody is renewing it: the
worker died, hung, or lost the database. The reaper (leader only) then moves the
job, in one guarded statement per bounded batch (``sql/reap_expired.sql``):

- back to ``queued``, available now, with a NOTIFY per queue so an idle worker
  picks it up at once, when attempts remain;
- to ``lost`` (finished, with the reason as its error) when the attempt that
  expired was the last one;
- to ``canceled`` when a cancel had been requested: nobody wants it run again.

Every moved job gets a ``job_events`` row saying whose lease expired and when,
what the workers row says of that worker, and how often a worker has died
running the job (``give_back_jobs()``, migration 0006: the attempt is spent,
so a job that kills or hangs every worker ends ``lost``).
Batches keep each transaction short (row locks, WAL, replication lag) even
after a mass failure; a run keeps taking batches until one comes back short or
``max_batches`` is reached, so one run stays bounded too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.logs import log_event, logged_ids
from queue_engine.orchestrator.sweep import SweepService

#: How often the leader sweeps (seconds); ``QUEUE_ENGINE_SWEEP_S``.
SWEEP_DEFAULT_S = table.SWEEP_S.default
#: Rows moved per statement.
BATCH_SIZE_DEFAULT = 1000
#: Batches per run; what is left waits for the next sweep.
MAX_BATCHES_DEFAULT = 20

log = logging.getLogger("queue_engine.reaper")


@dataclass(frozen=True, slots=True)
class ReapedJob:
    """One job the reaper moved, as the statement returned it."""

    id: int
    queue: str
    task: str
    status: str
    attempt: int
    max_attempts: int
    worker_id: str | None
    expired_at: datetime


@dataclass(frozen=True, slots=True)
class ReapResult:
    """What one reaper run did."""

    requeued: list[ReapedJob] = field(default_factory=list)
    lost: list[ReapedJob] = field(default_factory=list)
    canceled: list[ReapedJob] = field(default_factory=list)
    batches: int = 0

    @property
    def did_work(self) -> bool:
        """True when at least one job was moved."""
        return bool(self.requeued or self.lost or self.canceled)

    @property
    def total(self) -> int:
        """Number of jobs moved."""
        return len(self.requeued) + len(self.lost) + len(self.canceled)

    def log_fields(self) -> dict[str, Any]:
        """Counts per outcome and the number of statements run."""
        return {
            "requeued": len(self.requeued),
            "lost": len(self.lost),
            "canceled": len(self.canceled),
            "batches": self.batches,
        }


class Reaper(SweepService[ReapResult]):
    """Leader-only service that recovers jobs whose lease expired."""

    name = "reaper"
    interval_default_s = SWEEP_DEFAULT_S
    batch_size_default = BATCH_SIZE_DEFAULT
    max_batches_default = MAX_BATCHES_DEFAULT

    def reap_batch(self, conn: psycopg.Connection[Any]) -> list[ReapedJob]:
        """Run one bounded batch (one statement, one transaction) and return the jobs moved."""
        params = {
            "now": self.now(),
            "limit": self.batch_size,
            "jobs_channel": queries.jobs_channel(self.schema),
        }
        rows = conn.execute(queries.query("reap_expired", self.schema), params).fetchall()
        return [ReapedJob(*row) for row in rows]

    def run_once(self) -> ReapResult:
        """Take batches until one is short or ``max_batches`` ran; log what moved."""
        moved: list[ReapedJob] = []
        batches = 0
        try:
            with self.session() as conn:

                def batch() -> bool:
                    jobs = self.reap_batch(conn)
                    moved.extend(jobs)
                    return len(jobs) == self.batch_size

                batches = self.batches(batch)
        finally:
            result = ReapResult(
                requeued=[j for j in moved if j.status == "queued"],
                lost=[j for j in moved if j.status == "lost"],
                canceled=[j for j in moved if j.status == "canceled"],
                batches=batches,
            )
            self._log_outcome(result)
        return result

    def _log_outcome(self, result: ReapResult) -> None:
        if result.requeued:
            log_event(
                log,
                logging.INFO,
                "reaper.requeued",
                count=len(result.requeued),
                queues=",".join(sorted({j.queue for j in result.requeued})),
                job_ids=logged_ids(j.id for j in result.requeued),
            )
        if result.lost:
            # Loud: a job that will not run again without an operator's retry.
            log_event(
                log,
                logging.WARNING,
                "reaper.lost",
                count=len(result.lost),
                job_ids=logged_ids(j.id for j in result.lost),
                hint="attempts spent while the lease expired; `queue-ctl retry ID` to run again",
            )
        if result.canceled:
            log_event(
                log,
                logging.INFO,
                "reaper.canceled",
                count=len(result.canceled),
                job_ids=logged_ids(j.id for j in result.canceled),
            )
