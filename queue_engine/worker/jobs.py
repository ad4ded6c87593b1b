"""The jobs a worker holds: claimed, running, or run with an outcome not yet sent.

Three threads look at them: the main loop (claims, runs, finishes), the
heartbeat (renews their leases, writes their progress, marks them canceled or
lost) and the job watchdog (writes a trip's outcome). :class:`HeldJobs` keeps
them in one place behind one lock, so each of those parts asks it rather than
sharing a dict. Claimed jobs wait in ``ready`` (in claim order); outcomes wait
in ``pending`` until the next finish-and-claim statement sends them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from queue_engine.foundation.logs import log_event
from queue_engine.producer.context import ClaimedJob
from queue_engine.worker import outcomes as oc
from queue_engine.worker.outcomes import Outcome

log = logging.getLogger("queue_engine.worker")


@dataclass(slots=True)
class HeldJob:
    """A job this worker holds (claimed, running or run but not yet flushed)."""

    job: ClaimedJob
    started: bool = False
    canceled: bool = False
    lost: bool = False
    progress: str | None = None
    progress_dirty: bool = False
    advisory_locked: bool = False


class JobNotes(Protocol):
    """Who is told when a held job is canceled or lost (the job watchdog)."""

    def note_cancel(self, job_id: int) -> None:
        """A cancel of ``job_id`` was seen."""
        ...

    def note_lost(self, job_id: int, attempt: int | None = None) -> None:
        """``job_id`` (``attempt``) is no longer this worker's."""
        ...


class HeldJobs:
    """The held jobs, the ready queue, the running one and the pending outcomes."""

    def __init__(
        self,
        notes: JobNotes,
        *,
        worker_id: str,
        zombie_grace_s: float,
        clock: Callable[[], float],
    ) -> None:
        """``notes`` hears of cancels and losses; ``clock`` dates the first pending outcome."""
        self._notes = notes
        self._worker_id = worker_id
        self._zombie_grace_s = zombie_grace_s
        self._clock = clock
        self._lock = threading.Lock()  # guards _held (the heartbeat iterates it)
        self._held: dict[int, HeldJob] = {}
        #: How many held jobs have a lock key (most batches have none: no scan per flush).
        self._keyed = 0
        self.ready: deque[ClaimedJob] = deque()  # claimed, not started
        self.pending: list[Outcome] = []  # run, not yet flushed
        self.pending_since = 0.0
        self.current: HeldJob | None = None  # the job whose handler runs now

    # -- holding and letting go ---------------------------------------------------

    def get(self, job_id: int) -> HeldJob | None:
        """The held job ``job_id``, if held."""
        with self._lock:
            return self._held.get(job_id)

    def all(self) -> list[HeldJob]:
        """A snapshot of every held job."""
        with self._lock:
            return list(self._held.values())

    def settle(self, outcomes: Iterable[Outcome], claimed: list[ClaimedJob]) -> list[HeldJob]:
        """Stop holding the jobs of sent ``outcomes``, hold ``claimed``; return those let go.

        One step under the lock, so the heartbeat never sees a job half-way
        between held and finished.
        """
        with self._lock:
            pop = self._held.pop
            done = [h for o in outcomes if (h := pop(o.job_id, None)) is not None]
            held = self._held
            for job in claimed:
                held[job.id] = HeldJob(job)
            if self._keyed or any(job.lock_key is not None for job in claimed):
                self._keyed = sum(1 for h in held.values() if h.job.lock_key is not None)
        self.ready.extend(claimed)
        return done

    def start(self, job: ClaimedJob) -> tuple[HeldJob, bool]:
        """Mark ``job`` started; return it and whether a cancel was requested already."""
        with self._lock:
            held = self._held.get(job.id)
            if held is None:  # cannot happen: claimed jobs are held until flushed
                held = self._held[job.id] = HeldJob(job)
                self._keyed += job.lock_key is not None
            held.started = True
            return held, held.canceled or job.cancel_requested

    def forget(self, held: HeldJob) -> None:
        """Stop holding ``held`` without an outcome (a zombie)."""
        with self._lock:
            if self._held.get(held.job.id) is held:
                del self._held[held.job.id]
                self._keyed -= held.job.lock_key is not None

    def take_unstarted(self) -> list[Outcome]:
        """Give-back outcomes for every held job not started yet; the ready queue is emptied.

        Used at shutdown and when the worker parks: another worker may run them.
        """
        with self._lock:
            unstarted = [h.job for h in self._held.values() if not h.started]
        self.ready.clear()
        return [oc.released(job) for job in unstarted]

    def unstarted(self) -> list[ClaimedJob]:
        """Held jobs not started yet (the ready queue is left as it is)."""
        with self._lock:
            return [h.job for h in self._held.values() if not h.started]

    def any_lock_keyed(self, outcomes: Iterable[Outcome]) -> bool:
        """True when one of ``outcomes`` ends a held job that has a lock key."""
        with self._lock:
            if not self._keyed:
                return False
            return any(
                h.job.lock_key is not None
                for h in (self._held.get(o.job_id) for o in outcomes)
                if h is not None
            )

    def shortest_own_lease_s(self) -> int | None:
        """The shortest ``lease_ttl_s`` a held job sets itself (None: none sets one)."""
        with self._lock:
            leases = [h.job.lease_ttl_s for h in self._held.values() if h.job.lease_ttl_s]
        return min(leases) if leases else None

    # -- outcomes waiting to be sent -----------------------------------------------

    def add_outcome(self, outcome: Outcome) -> None:
        """Queue ``outcome`` for the next finish statement."""
        if not self.pending:
            self.pending_since = self._clock()
        self.pending.append(outcome)

    def take_pending(self) -> list[Outcome]:
        """The pending outcomes, and forget them (the caller sends them)."""
        pending, self.pending = self.pending, []
        return pending

    def zombie_outcomes(self) -> list[HeldJob]:
        """Drop pending outcomes of attempts found no longer ours; return their jobs.

        (A reconnect after a server crash can find the server lost the claim
        or the finish: the heartbeat then reports the job lost.)
        """
        if not self.pending:
            return []
        with self._lock:
            zombies = {
                o.job_id: h
                for o in self.pending
                if (h := self._held.get(o.job_id)) is not None
                and h.lost
                and h.job.attempt == o.attempt
            }
        if zombies:
            self.pending = [o for o in self.pending if o.job_id not in zombies]
        return list(zombies.values())

    # -- what the heartbeat and notifications report ---------------------------------

    def progress_pending(self) -> bool:
        """True when some held job has progress not yet written."""
        with self._lock:
            return any(h.progress_dirty for h in self._held.values())

    def report_progress(self, held: HeldJob, data: dict[str, Any]) -> None:
        """Buffer a handler's progress for the next beat."""
        text = oc.encode_json(data)  # refuses what jsonb cannot store, in the handler
        with self._lock:
            held.progress = text
            held.progress_dirty = True

    def take_progress(self, held: HeldJob) -> str | None:
        """The job's progress not written yet (sent with its outcome), or None.

        Called once the handler returned: only the heartbeat can still clear
        the flag, so a clear flag read without the lock is the answer (no lock
        taken per job that reported no progress).
        """
        if not held.progress_dirty:
            return None
        with self._lock:
            if not held.progress_dirty:
                return None
            held.progress_dirty = False
            return held.progress

    def for_beat(self) -> list[tuple[int, int, str | None]]:
        """``(id, attempt, progress or None)`` of every held job; progress counts as written."""
        with self._lock:
            rows = []
            for h in self._held.values():
                rows.append((h.job.id, h.job.attempt, h.progress if h.progress_dirty else None))
                h.progress_dirty = False
            return rows

    def mark_canceled(self, job_ids: Iterable[int]) -> None:
        """A cancel of these jobs was requested: stop them at their next checkpoint."""
        noted = []
        with self._lock:
            for job_id in job_ids:
                held = self._held.get(job_id)
                if held is not None:
                    held.canceled = True
                    noted.append(job_id)
        for job_id in noted:
            self._notes.note_cancel(job_id)

    def lost_of(self, lost_ids: Iterable[int], attempts: dict[int, int]) -> list[HeldJob]:
        """Held jobs among ``lost_ids`` still at the attempt that was found lost.

        The same job may have been finished and claimed again (a new attempt)
        while the statement ran: only the attempt it looked at is lost.
        """
        with self._lock:
            return [
                h
                for job_id in lost_ids
                if (h := self._held.get(job_id)) is not None
                and not h.lost
                and h.job.attempt == attempts.get(job_id)
            ]

    def mark_lost(self, held: HeldJob, reason: str) -> None:
        """The job is no longer ours: stop its execution (a zombie), never write its outcome."""
        if held.lost:
            return
        held.lost = True
        self._notes.note_lost(held.job.id, held.job.attempt)
        log_event(
            log,
            logging.ERROR,
            "job.lease_lost",
            job_id=held.job.id,
            attempt=held.job.attempt,
            worker_id=self._worker_id,
            running=held is self.current,
            reason=f"{reason}; it is stopped at its next checkpoint (hard stop, exit 77, "
            f"after {self._zombie_grace_s:g}s) and its outcome is not written",
        )
