"""Fast recovery: the jobs of a worker whose database session ended go back at once.

The lease is the rule that always works, but it is slow on purpose: with the
defaults a job whose worker died waits up to a minute before the reaper sees
its lease lapse. Most deaths are visible much sooner. Every worker writes the
pid of its database session (``backend_pid``) when it registers and again
after each reconnect, and a session ends when its process does: at once for
SIGKILL, a crash or an OOM kill (the kernel closes the socket), within the
keepalive timeout for a host that vanished. So the leader checks, every
``QUEUE_ENGINE_RECOVERY_S`` (default 1 s; one cheap statement,
``sql/sweep_gone_workers.sql``), which registered workers no longer have their
session in ``pg_stat_activity`` (stopped ones too while they still own a
running job: a handler's ``SystemExit`` stops its worker "cleanly" with the job
left running); it marks them ``gone`` and gives their running
jobs back with the reaper's rules (queued / lost / canceled, an event, a NOTIFY
per queue), so a job of a killed worker runs again on another worker within
about two seconds. The attempt is not refunded, and the job's error counts
how often a worker died running it (``give_back_jobs()``, migration 0006), so
a poison job (its handler kills every process that runs it) ends ``lost``
after ``max_attempts`` deaths. What the leader knows of a death goes into the
reason: the session's end, the age of the last heartbeat, the RSS it
reported, a dead flag set before; the exit signal is known only to the
process's parent (systemd's journal).

What keeps this from recovering the job of a live worker:

- a pid reused by a newer session does not count as the worker's (its
  ``backend_start`` is after the worker's last heartbeat);
- a worker that heartbeated in the last ``min_age_s`` is left alone, so one
  that has just reconnected (and re-registered with its new pid) is not raced;
- sessions of an earlier server life are not looked at: a Postgres restart
  ends every session and proves nothing about the workers, which re-register
  when they reconnect.

A live worker whose session was ended from outside (``pg_terminate_backend``,
a network partition long enough for the server's keepalive) does lose its job
to another worker; its next heartbeat finds the job gone and stops it as a
zombie, and its late finish is ignored. That is at-least-once delivery, which
handlers must tolerate anyway.

Behind a transaction-pooling connection pooler (pgbouncer ``pool_mode =
transaction``) ``backend_pid`` is a pooled server connection, not the
worker's: set ``QUEUE_ENGINE_RECOVERY_S=0`` there and rely on the lease.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Unpack

from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.logs import log_event, logged_ids
from queue_engine.orchestrator.sweep import SweepOptions, SweepService

#: How often the leader looks for ended sessions (seconds); ``QUEUE_ENGINE_RECOVERY_S``.
RECOVERY_DEFAULT_S = table.RECOVERY_S.default
#: A worker row heartbeated more recently than this is never judged gone.
MIN_AGE_DEFAULT_S = 1.0
#: Gone workers handled per run; the rest are handled next run.
BATCH_SIZE_DEFAULT = 100

log = logging.getLogger("queue_engine.fast_recovery")


@dataclass(frozen=True, slots=True)
class GoneWorker:
    """One worker whose session ended, and what happened to its running jobs."""

    id: str
    host: str
    pid: int
    backend_pid: int
    requeued: list[int]
    lost: list[int]
    canceled: list[int]
    queues: str

    @property
    def job_ids(self) -> list[int]:
        """Every job recovered from this worker."""
        return sorted(self.requeued + self.lost + self.canceled)


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What one recovery run did."""

    workers: list[GoneWorker] = field(default_factory=list)

    @property
    def did_work(self) -> bool:
        """True when a worker was found gone."""
        return bool(self.workers)

    @property
    def requeued(self) -> list[int]:
        """Ids of jobs put back in their queue."""
        return sorted(i for w in self.workers for i in w.requeued)

    @property
    def lost(self) -> list[int]:
        """Ids of jobs that had spent their attempts."""
        return sorted(i for w in self.workers for i in w.lost)

    @property
    def canceled(self) -> list[int]:
        """Ids of jobs whose cancel had been requested."""
        return sorted(i for w in self.workers for i in w.canceled)

    def log_fields(self) -> dict[str, Any]:
        """Counts of gone workers and of jobs per outcome."""
        return {
            "gone": len(self.workers),
            "requeued": len(self.requeued),
            "lost": len(self.lost),
            "canceled": len(self.canceled),
        }


class FastRecovery(SweepService[RecoveryResult]):
    """Leader-only service that recovers the jobs of workers whose session ended."""

    name = "fast_recovery"
    interval_default_s = RECOVERY_DEFAULT_S
    batch_size_default = BATCH_SIZE_DEFAULT
    # No stagger by default: this is the fast path, and one statement a second is cheap.
    stagger_default_s = 0.0

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        min_age_s: float = MIN_AGE_DEFAULT_S,
        **options: Unpack[SweepOptions],
    ) -> None:
        super().__init__(dsn, schema, **options)
        if min_age_s < 0:
            raise ValueError("FastRecovery: min_age_s must be >= 0")
        self.min_age_s = float(min_age_s)

    def run_once(self) -> RecoveryResult:
        """Find gone workers, mark them, give back their running jobs; log each worker."""
        params = {
            "now": self.now(),
            "min_age_s": self.min_age_s,
            "limit": self.batch_size,
            "jobs_channel": queries.jobs_channel(self.schema),
        }
        with self.session() as conn:
            rows = conn.execute(queries.query("sweep_gone_workers", self.schema), params).fetchall()
        result = RecoveryResult(workers=[GoneWorker(*row) for row in rows])
        for w in result.workers:
            self._log_worker(w)
        return result

    def _log_worker(self, w: GoneWorker) -> None:
        fields: dict[str, Any] = {
            "worker_id": w.id,
            "host": w.host,
            "pid": w.pid,
            "backend_pid": w.backend_pid,
        }
        if not w.job_ids:
            log_event(log, logging.INFO, "worker.gone", **fields, jobs=0)
            return
        log_event(
            log,
            logging.WARNING,
            "worker.gone",
            **fields,
            queues=w.queues,
            requeued=logged_ids(w.requeued),
            lost=logged_ids(w.lost),
            canceled=logged_ids(w.canceled),
            hint=(
                f"the database session of worker {w.id} (host {w.host}, pid {w.pid}) ended "
                "while it ran these jobs: recovered without waiting for their lease; "
                "look for a crash, OOM kill or kill -9 of that process"
            ),
        )
        if w.lost:
            log_event(
                log,
                logging.WARNING,
                "fast_recovery.lost",
                count=len(w.lost),
                job_ids=logged_ids(w.lost),
                hint=(
                    "attempts spent, the last by its worker process dying (a poison job?); "
                    "`queue-ctl show ID` counts the deaths, `queue-ctl retry ID` runs it again"
                ),
            )
