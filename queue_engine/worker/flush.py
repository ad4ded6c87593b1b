"""Finish and claim: send the pending outcomes and claim the next jobs in one statement.

This is the worker's hot path: at steady state a job costs exactly this one
statement (``finish_and_claim_jobs.sql``), which records the outcome of the
job just run and claims the next. Around it, the rare cases:

- a claim that lost a lock-key race (``UniqueViolation``) or a serialization
  failure rolls the whole statement back, finishes included: the outcomes are
  then sent one by one, and the claim is retried (a few times in a row);
- an outcome the database refuses to store (a value ``jsonb`` rejects) is
  replaced by a failure that says why, sent alone, so the others are stored;
- after the finish committed, the advisory locks of finished keyed jobs are
  released; when the finished jobs had lock keys and the claim came back short,
  one more claim looks again (the keys looked busy to that statement's snapshot);
- the outcome of an attempt found no longer ours is never sent (a zombie).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from queue_engine.foundation.db import RECONNECT_ERRORS, first_line
from queue_engine.foundation.errors import DatabaseUnavailable
from queue_engine.foundation.logs import log_event, mask_secrets
from queue_engine.producer.context import ClaimedJob
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store
from queue_engine.worker.connection import Connection, WorkerConnection
from queue_engine.worker.gate import Gate
from queue_engine.worker.handover import HandoverPolicy
from queue_engine.worker.jobs import HeldJob, HeldJobs
from queue_engine.worker.outcomes import Outcome

log = logging.getLogger("queue_engine.worker")

#: How often a claim that lost a lock-key race is retried in a row.
CLAIM_RACE_RETRIES = 5
#: Statement errors that abort a finish-and-claim without any effect: retry.
RETRYABLE_CLAIM_ERRORS = (
    pg_errors.UniqueViolation,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
)


class Flusher:
    """Sends outcomes and claims jobs for one worker; counts the jobs it finished."""

    def __init__(
        self,
        connection: WorkerConnection,
        jobs: HeldJobs,
        gate: Gate,
        *,
        worker_id: str,
        lease_ttl_s: int,
        stopping: threading.Event,
        batch_log: bool = False,
    ) -> None:
        """``batch_log``: log the successes of a statement in one line (a prefetching worker)."""
        self.connection = connection
        self.jobs = jobs
        self.gate = gate
        self.worker_id = worker_id
        self.schema = connection.schema
        self.queue = connection.queue
        self.host = connection.host
        self.lease_ttl_s = lease_ttl_s
        self._stopping = stopping
        #: Which workflows' successes carry the hand-over (worker/handover.py).
        self.handover = HandoverPolicy()
        #: Outcomes the database applied (finishes that matched), since the start.
        self.jobs_done = 0
        #: One ``job.succeeded_batch`` line per statement instead of one line per success.
        self.batch_log = batch_log

    def flush(
        self,
        *,
        claim_limit: int,
        extra: list[Outcome] | None = None,
        attempts: int | None = None,
        deadline: float | None = None,
    ) -> int:
        """Send pending outcomes (plus ``extra``) and claim up to ``claim_limit``; return claimed."""
        for zombie in self.jobs.zombie_outcomes():
            self.forget_zombie(zombie, ran=True)
        outcomes = self.jobs.pending + (extra or [])
        lock_keyed = self.jobs.any_lock_keyed(outcomes)
        stopping = self._stopping.is_set()
        if stopping:
            claim_limit = 0
        handover = claim_limit > 0 and self.handover.should_try(outcomes)
        claimed, solo = self.connection.run(
            lambda conn: self._finish_and_claim(conn, outcomes, claim_limit, handover),
            attempts=attempts,
            deadline=deadline,
        )
        self.jobs.take_pending()
        if claimed < claim_limit and (lock_keyed or solo) and not self._stopping.is_set():
            # The finished jobs' lock keys looked busy to that statement's snapshot,
            # or it was a hand-over without a claim that handed nothing over:
            # look again (a round trip only those pay).
            more, _ = self.connection.run(
                lambda conn: self._finish_and_claim(conn, [], claim_limit - claimed)
            )
            claimed += more
        return claimed

    def forget_zombie(self, held: HeldJob, *, ran: bool) -> None:
        """Drop a job that is no longer ours without sending any outcome for it."""
        self.jobs.forget(held)
        key = held.job.lock_key
        if held.advisory_locked and key is not None:
            held.advisory_locked = False
            # A lost session has released it already.
            with contextlib.suppress(DatabaseUnavailable):
                self.connection.run(lambda conn: unlock_key(conn, self.schema, key), attempts=1)
        log_event(
            log,
            logging.WARNING,
            "job.zombie_stopped" if ran else "job.zombie_skipped",
            job_id=held.job.id,
            task=held.job.task,
            attempt=held.job.attempt,
            worker_id=self.worker_id,
            reason="the job is no longer this worker's running attempt; no outcome written",
        )

    def _finish_and_claim(
        self, conn: Connection, outcomes: list[Outcome], claim_limit: int, handover: bool = False
    ) -> tuple[int, bool]:
        """One finish-and-claim, recovering from a lost lock-key race.

        Returns the claimed count, and whether the statement that counted was
        the ``solo`` variant, which claims nothing of its own.
        ``handover``: send the workflow nodes' successes with the hand-over.

        Runs under the connection lock, bookkeeping included, so the heartbeat
        never sees a job half-way between held and finished.
        """
        finished: dict[int, str] = {}
        claimed: list[ClaimedJob] = []
        solo = False
        to_send = outcomes
        for _ in range(CLAIM_RACE_RETRIES):
            try:
                result = store.finish_and_claim(
                    conn,
                    self.schema,
                    worker_id=self.worker_id,
                    queue=self.queue,
                    outcomes=to_send,
                    claim_limit=claim_limit,
                    lease_ttl_s=self.lease_ttl_s,
                    gate=self.gate.claim_gate(),
                    handover=handover,
                )
            except RETRYABLE_CLAIM_ERRORS as exc:
                # The whole statement rolled back, finishes included: never lose them.
                log.debug("claim lost a race (%s); retrying", first_line(exc))
                if to_send:
                    finished.update(self._finish_one_by_one(conn, to_send))
                    to_send = []
                continue
            except psycopg.DatabaseError as exc:
                if isinstance(exc, RECONNECT_ERRORS) or not to_send:
                    raise
                # Some outcome cannot be stored (a value the database refuses):
                # store the others, and a failure saying why for that one.
                log.warning("finish refused (%s); finishing one by one", first_line(exc))
                finished.update(self._finish_one_by_one(conn, to_send))
                to_send = []
                continue
            finished.update(result.finished)
            claimed = result.claimed
            solo = result.solo
            if claim_limit:
                self.gate.note_claim(result.throttled)
                self.handover.note(to_send, handover, claimed)
            break
        by_id = {h.job.id: h for h in self.jobs.settle(outcomes, claimed)}
        for held in by_id.values():
            if held.advisory_locked and held.job.lock_key is not None:
                unlock_key(conn, self.schema, held.job.lock_key)
        if self.batch_log:
            self._log_batch(outcomes, by_id, finished)
        else:
            for outcome in outcomes:
                self._log_outcome(outcome, by_id.get(outcome.job_id), finished.get(outcome.job_id))
        return len(claimed), solo

    def _log_batch(
        self, outcomes: list[Outcome], by_id: dict[int, HeldJob], finished: dict[int, str]
    ) -> None:
        """Log a prefetching worker's outcomes: one ``job.succeeded_batch`` line for the successes.

        With prefetch 100 the per-job INFO line was the largest part of the
        worker's CPU per job (bench/runs/2026-11-27-log.md, "Prefetch: the worker's
        Python per job"); a batch line costs one record per statement. Each
        success's own ``job.succeeded`` line is still written at DEBUG; every
        other outcome keeps its own line at its own level.
        """
        successes: list[Outcome] = []
        tasks: dict[str, int] = {}
        duration_ms = followups = 0
        for outcome in outcomes:
            status = finished.get(outcome.job_id)
            held = by_id.get(outcome.job_id)
            if status == "succeeded" and outcome.kind == "succeeded":
                successes.append(outcome)
                task = held.job.task if held is not None else "?"
                tasks[task] = tasks.get(task, 0) + 1
                duration_ms += outcome.duration_ms or 0
                if outcome.followups:
                    followups += len(outcome.followups)
            else:
                self._log_outcome(outcome, held, status)
        if not successes:
            return
        self.jobs_done += len(successes)
        if log.isEnabledFor(logging.DEBUG):
            for outcome in successes:
                self._log_success(outcome, by_id.get(outcome.job_id), logging.DEBUG)
        if not log.isEnabledFor(logging.INFO):
            return
        fields: dict[str, Any] = {
            "jobs": len(successes),
            "job_ids": id_ranges(o.job_id for o in successes),
            "tasks": ",".join(f"{name}:{n}" for name, n in tasks.items()),
            "queue": self.queue,
            "duration_ms": duration_ms,
            "worker_id": self.worker_id,
        }
        if followups:
            fields["followups"] = followups
        log_event(log, logging.INFO, "job.succeeded_batch", **fields)

    def _log_success(self, outcome: Outcome, held: HeldJob | None, level: int) -> None:
        """A success's own ``job.succeeded`` line (the fields :meth:`_log_outcome` gives it)."""
        fields: dict[str, Any] = {
            "job_id": outcome.job_id,
            "task": held.job.task if held is not None else None,
            "queue": self.queue,
            "attempt": outcome.attempt,
            "duration_ms": outcome.duration_ms,
            "worker_id": self.worker_id,
        }
        if outcome.followups:
            fields["followups"] = len(outcome.followups)
        log_event(log, level, "job.succeeded", **fields)

    def _finish_one_by_one(self, conn: Connection, outcomes: list[Outcome]) -> dict[int, str]:
        """Finish each outcome alone; one the database refuses becomes a failure that says why."""
        common: dict[str, Any] = {
            "worker_id": self.worker_id,
            "queue": self.queue,
            "host": self.host,
        }
        finished: dict[int, str] = {}
        for outcome in outcomes:
            try:
                finished.update(store.finish_only(conn, self.schema, outcomes=[outcome], **common))
            except psycopg.DatabaseError as exc:
                if isinstance(exc, RECONNECT_ERRORS):
                    raise
                replacement = oc.storage_failure(outcome, exc)
                finished.update(
                    store.finish_only(conn, self.schema, outcomes=[replacement], **common)
                )
        return finished

    def _log_outcome(self, outcome: Outcome, held: HeldJob | None, status: str | None) -> None:
        job = held.job if held is not None else None
        fields: dict[str, Any] = {
            "job_id": outcome.job_id,
            "task": job.task if job else None,
            "queue": self.queue,
            "attempt": outcome.attempt,
            "duration_ms": outcome.duration_ms,
            "worker_id": self.worker_id,
        }
        if status is None:
            log_event(
                log,
                logging.WARNING,
                "job.finish_ignored",
                **fields,
                wanted=outcome.kind,
                reason="the job is no longer this worker's running attempt (reaped, canceled or re-claimed)",
            )
            return
        self.jobs_done += 1
        event = outcome.event
        if status == "canceled" and outcome.kind != "canceled":
            event = "job.canceled"
        if outcome.kind in ("succeeded", "released", "snoozed") and event != "job.canceled":
            if outcome.followups:
                fields["followups"] = len(outcome.followups)
            if outcome.kind == "snoozed":
                fields["delay_s"] = outcome.delay_s
            log_event(log, logging.INFO, event, **fields)
            return
        if outcome.message:
            fields["error"] = outcome.message
        if outcome.kind == "retry_scheduled":
            fields["delay_s"] = round(outcome.delay_s, 3)
        if job is not None and outcome.kind != "canceled":
            fields["args"] = json.dumps(mask_secrets(job.args), default=str)
        level = (
            logging.INFO if event in ("job.canceled", "job.retry_scheduled") else logging.WARNING
        )
        log_event(log, level, event, **fields)


def unlock_key(conn: Connection, schema: str, key: str) -> None:
    """Release a lock key's advisory lock; a failure is only logged.

    After the finish has committed: a failure here must not re-run the finish
    and claim (the caller's retry would). A lost session released the lock anyway.
    """
    try:
        store.unlock_key(conn, schema, key)
    except psycopg.Error as exc:
        log.debug("releasing the advisory lock of %r failed: %s", key, exc)


def id_ranges(ids: Iterable[int]) -> str:
    """Job ids as sorted runs, every id named: ``4-103`` or ``7,9-12``.

    A batch claimed by one statement is mostly consecutive ids, so the batch
    line names every job in a few characters.
    """
    out: list[str] = []
    first = last = None
    for job_id in sorted(ids):
        if last is not None and job_id == last + 1:
            last = job_id
            continue
        if first is not None:
            out.append(str(first) if first == last else f"{first}-{last}")
        first = last = job_id
    if first is not None:
        out.append(str(first) if first == last else f"{first}-{last}")
    return ",".join(out)
