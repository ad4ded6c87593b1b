"""The dead-worker sweep: flag workers that stopped heartbeating while they run a job.

A worker heartbeats its row (and renews its job's lease) every
``QUEUE_ENGINE_HEARTBEAT_S`` from a thread of its own. When the row has not
moved for ``dead_after_s`` (default three beats) and the worker still owns a
running job, something is badly wrong with that process: hung on a lock,
stuck in a C call that holds the GIL (which freezes the heartbeat thread
too), swapped out, or on a host that vanished without its TCP connection
closing. The worker cannot report that itself, so the leader does, from a
separate process (``sql/sweep_dead_workers.sql``, one statement per run):

- it sets ``workers.flagged_dead_at`` and logs one loud, actionable
  ``worker.flagged_dead`` line per worker naming the host, pid, worker id and
  job ids, and when the lease lapses;
- it clears the flag (``worker.flag_cleared``) once the worker heartbeats
  again: it was slow, not dead.

The job itself is not touched here: a silent worker renews no lease, so the
reaper recovers the job when the lease lapses, and a worker whose session is
gone is handled even sooner by :mod:`~queue_engine.orchestrator.fast_recovery`.
Flagging first and recovering by lease keeps one rule for "this attempt is
over" (the lease), while the operator learns about the hang within
``dead_after_s`` instead of finding a re-run job later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Unpack

from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.logs import log_event, logged_ids
from queue_engine.orchestrator.reaper import SWEEP_DEFAULT_S
from queue_engine.orchestrator.sweep import SweepOptions, SweepService

#: Default ``QUEUE_ENGINE_DEAD_AFTER_S`` with the default heartbeat (three of them).
DEAD_AFTER_DEFAULT_S = table.dead_after_s({})
#: Workers flagged per run; the rest are flagged next run.
BATCH_SIZE_DEFAULT = 100

log = logging.getLogger("queue_engine.dead_workers")


@dataclass(frozen=True, slots=True)
class FlaggedWorker:
    """One worker the sweep flagged (or cleared), as the statement returned it."""

    action: str
    id: str
    host: str
    pid: int
    queue: str | None
    heartbeat_at: datetime
    silent_s: float | None
    job_ids: list[int]
    lease_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeadWorkerResult:
    """What one sweep did."""

    flagged: list[FlaggedWorker] = field(default_factory=list)
    cleared: list[FlaggedWorker] = field(default_factory=list)

    @property
    def did_work(self) -> bool:
        """True when a flag was set or cleared."""
        return bool(self.flagged or self.cleared)

    def log_fields(self) -> dict[str, Any]:
        """Counts of flags set and cleared."""
        return {"flagged": len(self.flagged), "cleared": len(self.cleared)}


def _iso(value: datetime | None) -> str:
    if value is None:
        return "unknown"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def flagged_hint(worker: FlaggedWorker) -> str:
    """The operator's next step, in words: what is wrong, what to check, what happens next."""
    jobs = "job" if len(worker.job_ids) == 1 else "jobs"
    silent = "?" if worker.silent_s is None else f"{worker.silent_s:.0f}"
    return (
        f"worker {worker.id} (host {worker.host}, pid {worker.pid}) has not heartbeated "
        f"for {silent} s while running {jobs} {logged_ids(worker.job_ids)}; its lease expires at "
        f"{_iso(worker.lease_expires_at)}. Check the process on {worker.host}: hung, or stuck "
        f"in a C call that holds the GIL (`py-spy dump --pid {worker.pid}`)? The job will be "
        "recovered when the lease lapses (at once if the process is killed)."
    )


class DeadWorkerSweep(SweepService[DeadWorkerResult]):
    """Leader-only service that flags silent workers owning running jobs, and unflags them."""

    name = "dead_workers"
    interval_default_s = SWEEP_DEFAULT_S
    batch_size_default = BATCH_SIZE_DEFAULT

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        dead_after_s: float = DEAD_AFTER_DEFAULT_S,
        **options: Unpack[SweepOptions],
    ) -> None:
        super().__init__(dsn, schema, **options)
        if dead_after_s <= 0:
            raise ValueError("DeadWorkerSweep: dead_after_s must be > 0")
        self.dead_after_s = float(dead_after_s)

    def run_once(self) -> DeadWorkerResult:
        """Flag silent workers and clear revived ones, in one statement; log each."""
        params = {
            "now": self.now(),
            "dead_after_s": self.dead_after_s,
            "limit": self.batch_size,
        }
        with self.session() as conn:
            rows = conn.execute(queries.query("sweep_dead_workers", self.schema), params).fetchall()
        workers = [FlaggedWorker(*row) for row in rows]
        result = DeadWorkerResult(
            flagged=[w for w in workers if w.action == "flagged"],
            cleared=[w for w in workers if w.action == "cleared"],
        )
        self._log_outcome(result)
        return result

    def _log_outcome(self, result: DeadWorkerResult) -> None:
        for w in result.flagged:
            # Loud: a process that is alive but not working, holding jobs hostage.
            log_event(
                log,
                logging.ERROR,
                "worker.flagged_dead",
                worker_id=w.id,
                host=w.host,
                pid=w.pid,
                queue=w.queue or "",
                job_ids=logged_ids(w.job_ids),
                silent_s=None if w.silent_s is None else round(w.silent_s, 1),
                lease_expires_at=_iso(w.lease_expires_at),
                hint=flagged_hint(w),
            )
        for w in result.cleared:
            log_event(
                log,
                logging.WARNING,
                "worker.flag_cleared",
                worker_id=w.id,
                host=w.host,
                pid=w.pid,
                heartbeat_at=_iso(w.heartbeat_at),
                hint="the worker heartbeats again: it was slow, not dead",
            )
