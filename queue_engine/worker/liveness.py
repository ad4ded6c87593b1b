"""Whether the worker is healthy, and what it writes when the job watchdog trips.

:class:`Liveness` is the worker's health gate (docs/guides/worker.md,
"systemd"): the daemon runtime sends ``READY``, ``STATUS``, ``WATCHDOG`` and
``STOPPING`` for every daemon (:mod:`queue_engine.daemon.runtime`), and pings
the watchdog only while the daemon's ``healthy`` callback says so; for the
worker that callback is :meth:`Liveness.healthy`. The main loop calls
:meth:`Liveness.mark_alive` between jobs and while it waits or retries.

:class:`TripRecorder` is what the job watchdog calls when it ends a job (budget,
stall, ignored cancel, zombie, SIGTERM grace): it writes the trip's outcome on a
short-lived connection of its own, because the worker's connection may be the
thing that is stuck.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from psycopg import sql

from queue_engine.foundation.db import connect
from queue_engine.foundation.logs import log_event
from queue_engine.producer.tasks import TaskRegistry
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store
from queue_engine.worker.jobs import HeldJob, HeldJobs
from queue_engine.worker.outcomes import Outcome
from queue_engine.worker.watchdog import ArmedJob, Trip

log = logging.getLogger("queue_engine.worker")

#: The watchdog's own connection: connect and statement timeouts (seconds, ms).
RECORD_CONNECT_TIMEOUT_S = 5
RECORD_STATEMENT_TIMEOUT_MS = 5000


class HelperThread(Protocol):
    """A thread whose ticks prove the process is not frozen (the job watchdog)."""

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        ...

    @property
    def last_tick(self) -> float:
        """The clock reading of its last tick."""
        ...


class Liveness:
    """The worker's health gate of the systemd watchdog pings."""

    def __init__(
        self,
        helper: HelperThread,
        *,
        busy: Callable[[], bool],
        within_s: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``within_s``: how recent the signs of life must be (``WatchdogSec``; None: no watchdog).

        ``busy()`` is True while a handler runs.
        """
        self._helper = helper
        self._busy = busy
        self._within_s = within_s or 0.0
        self._clock = clock
        self._main_mark = clock()  # the main loop's last sign of life

    def mark_alive(self) -> None:
        """The main loop shows a sign of life (between jobs, while waiting or retrying)."""
        self._main_mark = self._clock()

    def healthy(self) -> bool:
        """True when the process's loops run: the runtime pings the watchdog only then.

        Healthy means the helper thread ticked lately, and the main loop showed
        a sign of life lately or, while a handler runs (``busy``), need not (a
        long job is the job watchdog's business). A hang that freezes every
        thread (a C call holding the GIL) stops the pings, and systemd kills
        and restarts the process after ``WatchdogSec``. The caller's thread
        (the heartbeat) runs, or it would not ask.
        """
        now = self._clock()
        limit = self._within_s
        if not self._helper.alive or now - self._helper.last_tick > limit:
            return False
        return self._busy() or now - self._main_mark <= limit


class TripRecorder:
    """Writes the outcome of a job the watchdog ended, then marks the worker stopped."""

    def __init__(
        self,
        jobs: HeldJobs,
        tasks: TaskRegistry,
        *,
        dsn: str,
        schema: str,
        worker_id: str,
        queue: str,
        host: str,
        watchdog_clock: Callable[[], float],
        on_give_back: Callable[[], None],
    ) -> None:
        """``on_give_back`` runs after a SIGTERM grace trip is recorded (the process exits 0)."""
        self.jobs = jobs
        self.tasks = tasks
        self.dsn = dsn
        self.schema = schema
        self.worker_id = worker_id
        self.queue = queue
        self.host = host
        self._watchdog_clock = watchdog_clock
        self._on_give_back = on_give_back

    def record(self, armed: ArmedJob, trip: Trip) -> None:
        """Write a trip's outcome with a short-lived connection of its own, then tidy up.

        The main thread is inside the handler (the watchdog holds the arming
        lock, so it cannot leave), so the pending outcomes of jobs run earlier
        and the prefetched jobs that never started are sent in the same
        statement: nothing this worker holds waits for a lease. A zombie's
        outcome is never written. The worker connection is not touched: it may
        be the thing that is stuck.
        """
        held = self.jobs.get(armed.job_id)
        outcomes = list(self.jobs.pending) + [oc.released(job) for job in self.jobs.unstarted()]
        mine = None
        if held is not None and held.job.attempt == armed.attempt and trip.kind != "zombie":
            mine = self._outcome(held, armed, trip)
            outcomes.append(mine)
        conn = connect(
            self.dsn,
            application_name="queue-claim-worker-watchdog",
            connect_timeout=RECORD_CONNECT_TIMEOUT_S,
        )
        try:
            conn.execute(
                sql.SQL("SET statement_timeout = {}").format(
                    sql.Literal(RECORD_STATEMENT_TIMEOUT_MS)
                )
            )
            finished: dict[int, str] = {}
            if outcomes:
                finished = store.finish_only(
                    conn,
                    self.schema,
                    worker_id=self.worker_id,
                    queue=self.queue,
                    outcomes=outcomes,
                    host=self.host,
                )
            store.mark_stopped(conn, self.schema, worker_id=self.worker_id)
        finally:
            conn.close()
        if mine is not None:
            status = finished.get(mine.job_id)
            log_event(
                log,
                logging.INFO if trip.kind == "give_back" else logging.WARNING,
                f"job.{mine.kind}" if status is not None else "job.finish_ignored",
                job_id=mine.job_id,
                attempt=mine.attempt,
                status=status,
                worker_id=self.worker_id,
                error=trip.message,
            )
        if trip.kind == "give_back":
            self._on_give_back()

    def _outcome(self, held: HeldJob, armed: ArmedJob, trip: Trip) -> Outcome:
        job = held.job
        duration_ms = int((self._watchdog_clock() - armed.started) * 1000)
        progress = held.progress if held.progress_dirty else None
        if trip.kind == "give_back":
            return oc.given_back(job, duration_ms, progress=progress, message=trip.message)
        if trip.kind == "cancel":
            return oc.hard_canceled(job, duration_ms, progress=progress, message=trip.message)
        definition = self.tasks.get(job.task)
        return oc.watchdog_failure(
            job,
            duration_ms,
            message=trip.message,
            retry=definition.retry if definition is not None else None,
            progress=progress,
        )
