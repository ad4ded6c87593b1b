"""The claim worker's main loop: claim, execute, finish; one job at a time.

Why this module is long: it wires the worker's parts (connection, gate,
flush, runner, renewal, liveness, recycling, watchdog) and holds the main
loop, the idle wait and the shutdown; every behaviour lives in a part, and
what remains here is the ordering between them, which reads best in one place.

A job costs one statement at steady state: the outcome of the job just run
is flushed in the same statement that claims the next one (:mod:`.flush`).
With ``prefetch`` > 1 the worker holds up to that many claimed jobs, runs them
one after another and flushes their outcomes together (at the latest every
``flush_interval_s``), so the statements per job drop further while still one
handler executes at a time.

Idle, the worker waits for a NOTIFY on ``<schema>.jobs`` whose payload is its
queue, and polls in case a notification was lost (delayed jobs are found by
that poll too): every ``poll_s`` in a small fleet, less often in a big one, so
that the queue's idle workers poll about ``queue_poll_rate`` times a second
together (:mod:`.idle`). Between jobs it obeys the operator controls
(:mod:`.gate`) and its recycling limits (:mod:`.recycle`: after N jobs, past
an RSS or an age it stops like a SIGTERM between jobs and exits 79).
:class:`Worker` wires the parts, each with one job:

- :mod:`.connection`: the one database connection (lock, LISTEN, reconnect
  with backoff, repair after a reconnect);
- :mod:`.jobs`: the held, ready and running jobs and the outcomes not yet sent;
- :mod:`.gate`: the claim gate (pause, park, scale slot, rate, warm key);
- :mod:`.flush`: finish-and-claim (race retries, one-by-one fallback);
- :mod:`.runner`: running one job (checks, the handler, its outcome);
- :mod:`.recycle`: the recycling limits and the rule that says one is reached;
- :mod:`.renewal` and :mod:`.heartbeat`: the heartbeat thread's statement
  (worker row, leases, progress, cancels) and its cadence;
- :mod:`.watchdog`: ends a job the handler cannot or will not end;
- :mod:`.deadline`: ends the process when a handler holding the GIL freezes
  every thread, the watchdog's included (armed with the watchdog);
- :mod:`.liveness`: systemd READY/STATUS/WATCHDOG/STOPPING, and what a
  watchdog trip writes;
- :mod:`.handler_connections`: the pooled connection ``ctx.connect()`` lends.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable

import psycopg

from queue_engine import sql as queries
from queue_engine import task_publications
from queue_engine.daemon import StopRequested, process_id, wait_for_database
from queue_engine.db import connect, first_line
from queue_engine.errors import DatabaseUnavailable
from queue_engine.exit_codes import ExitCode
from queue_engine.migrate import ENGINE_SCHEMA_VERSION, wait_for_schema
from queue_engine.pooler import refuse_shared_sessions
from queue_engine.service import log_event
from queue_engine.tasks import TaskRegistry
from queue_engine.worker import store
from queue_engine.worker.connection import WorkerConnection
from queue_engine.worker.deadline import HardDeadline, process_timer
from queue_engine.worker.flush import Flusher
from queue_engine.worker.gate import DbGateStore, Gate
from queue_engine.worker.heartbeat import Heartbeat
from queue_engine.worker.idle import poll_interval
from queue_engine.worker.jobs import HeldJobs
from queue_engine.worker.liveness import Liveness, TripRecorder
from queue_engine.worker.recycle import RecycleLimits, Recycler, process_rss_mb
from queue_engine.worker.renewal import Renewer, idle_beat_s
from queue_engine.worker.runner import JobRunner
from queue_engine.worker.settings import WorkerSettings
from queue_engine.worker.watchdog import (
    ArmedJob,
    Graces,
    JobWatchdog,
    Trip,
)

__all__ = ["Worker"]

log = logging.getLogger("queue_engine.worker")

#: Idle waits are cut in slices this long, so a stop request is seen quickly.
WAIT_SLICE_S = 0.25
#: Attempts to write the last outcomes at shutdown when the database is down
#: (and at most until the shutdown grace has run out, counted from the stop).
SHUTDOWN_DB_ATTEMPTS = 8


class Worker:
    """One claim worker: ``run()`` blocks until ``stop()``; returns the exit code."""

    def __init__(
        self,
        settings: WorkerSettings,
        tasks: TaskRegistry,
        *,
        worker_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        exit: Callable[[int], object] = os._exit,
        rss_mb: Callable[[], float | None] = process_rss_mb,
        rand: Callable[[], float] = random.random,
    ) -> None:
        """``exit`` ends the process when the job watchdog trips (tests may replace it).

        ``rss_mb`` and ``rand`` are the recycler's RSS probe and the random
        source of its spread (:class:`~.recycle.Recycler`).
        """
        self.settings = settings
        self.tasks = tasks
        self.worker_id = worker_id or process_id("worker")
        self.schema = settings.schema
        self.host = socket.gethostname()
        self._sleep = sleep
        self._clock = clock
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._stop_at: float | None = None
        self._registered = False
        self._rand = rand
        #: Idle workers of the queue at the last probe (this one included).
        self.idle_workers = 1
        self.recycler = Recycler(
            RecycleLimits(settings.max_jobs, settings.max_rss_mb, settings.max_age_s),
            clock=clock,
            rss_mb=rss_mb,
            rand=rand,
        )
        self._watchdog = JobWatchdog(
            self._record_trip,
            graces=Graces(
                cancel_s=settings.cancel_grace_s,
                zombie_s=settings.zombie_grace_s,
                shutdown_s=settings.shutdown_grace_s,
            ),
            exit=exit,
            # The hard deadline is an exit path too: a worker whose exits are
            # injected (in-process tests) must not get the real, process-wide one.
            hard_deadline=(
                HardDeadline(settings.hard_deadline_grace_s, process_timer())
                if exit is os._exit
                else None
            ),
        )
        self.liveness = Liveness(self._watchdog, clock=clock)
        self.jobs = HeldJobs(
            self._watchdog,
            worker_id=self.worker_id,
            zombie_grace_s=settings.zombie_grace_s,
            clock=clock,
        )
        self.connection = WorkerConnection(
            dsn=settings.dsn,
            schema=self.schema,
            synchronous_commit=settings.synchronous_commit,
            worker_id=self.worker_id,
            queue=settings.queue,
            host=self.host,
            jobs=self.jobs,
            stopping=self._stopping,
            on_notify=self._on_notify,
            on_connect=self._on_connect,
            mark_alive=self.liveness.mark_alive,
            reconnect_max_s=settings.reconnect_max_s,
            sleep=sleep,
            clock=clock,
        )
        self.gate = Gate(
            DbGateStore(self.connection, worker_id=self.worker_id),
            worker_id=self.worker_id,
            queue=settings.queue,
            host=self.host,
            poll_s=settings.poll_s,
            heartbeat_s=settings.heartbeat_s,
            warm_key=settings.warm_key,
            affinity_wait_s=settings.affinity_wait_s,
        )
        self.flusher = Flusher(
            self.connection,
            self.jobs,
            self.gate,
            worker_id=self.worker_id,
            lease_ttl_s=settings.lease_ttl_s,
            stopping=self._stopping,
            batch_log=settings.prefetch > 1,
        )
        self.renewer = Renewer(
            self.connection,
            self.jobs,
            worker_id=self.worker_id,
            heartbeat_s=settings.heartbeat_s,
            lease_ttl_s=settings.lease_ttl_s,
            state=self._state,
            warm_key=lambda: self.gate.warm_key,
            clock=clock,
            publish_telemetry=settings.telemetry_notify == "on",
            idle_beat_s=idle_beat_s(settings.heartbeat_s, settings.dead_after()),
        )
        self._trips = TripRecorder(
            self.jobs,
            tasks,
            dsn=settings.dsn,
            schema=self.schema,
            worker_id=self.worker_id,
            queue=settings.queue,
            host=self.host,
            watchdog_clock=self._watchdog.clock,
            on_give_back=self._stopped_by_watchdog,
        )
        self.runner = JobRunner(
            settings,
            tasks,
            worker_id=self.worker_id,
            jobs=self.jobs,
            connection=self.connection,
            flusher=self.flusher,
            gate=self.gate,
            watchdog=self._watchdog,
            stopping=self._stopping,
            mark_alive=self.liveness.mark_alive,
        )
        self._heartbeat = Heartbeat(self, heartbeat_s=settings.heartbeat_s)
        self.jobs_channel = queries.jobs_channel(self.schema)
        self.cancel_channel = queries.cancel_channel(self.schema)
        self.controls_channel = queries.controls_channel(self.schema)

    @property
    def jobs_done(self) -> int:
        """Outcomes the database applied since the start."""
        return self.flusher.jobs_done

    # -- lifecycle ---------------------------------------------------------

    def stop(self) -> None:
        """Ask the worker to stop: no new claims; the current job finishes. Safe to call twice."""
        if not self._stopping.is_set():
            self._stop_at = self._clock()
            self._watchdog.note_stop()
            current = self.jobs.current
            log_event(
                log,
                logging.INFO,
                "worker.stopping",
                worker_id=self.worker_id,
                grace_s=self.settings.shutdown_grace_s,
                running_job=current.job.id if current else None,
            )
        self._stopping.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    def run(self) -> int:
        """Start, work until stopped, shut down cleanly; return the exit code.

        0 (``OK``) after a stop, 79 (``RECYCLE``) after a recycling limit.
        """
        try:
            self._start()
            self._main_loop()
        except StopRequested:
            pass
        finally:
            self._shutdown()
        return ExitCode.RECYCLE if self.recycler.reached is not None else ExitCode.OK

    def _start(self) -> None:
        self._check_reachable()
        refuse_shared_sessions(self.settings.dsn, "queue-claim-worker")
        wait_for_schema(
            self.settings.dsn,
            ENGINE_SCHEMA_VERSION,
            schema=self.schema,
            sleep=self._interruptible_sleep,
        )
        self.connection.run(lambda conn: None)  # connect, LISTEN, register
        self._registered = True
        published = self._publish_tasks()
        self._watchdog.start()
        self._heartbeat.start()
        self.recycler.start()
        self.liveness.ready(f"worker {self.worker_id} on queue {self.settings.queue}")
        log_event(
            log,
            logging.INFO,
            "worker.started",
            worker_id=self.worker_id,
            queue=self.settings.queue,
            prefetch=self.settings.prefetch,
            tasks=",".join(self.tasks.names()),
            published=published,
            synchronous_commit=self.settings.synchronous_commit,
            **self.recycler.limits.log_fields(),
        )

    def _publish_tasks(self) -> int:
        """Publish the registry's defaults, so that every enqueue path applies them; how many.

        A role without the grants of migration 0028 (roles made before it and
        not granted since) is told so in a warning; the worker runs all the
        same, and enqueues elsewhere keep the defaults published before.
        """
        try:
            return self.connection.run(
                lambda conn: task_publications.publish(
                    conn,
                    self.schema,
                    self.tasks,
                    worker_id=self.worker_id,
                    host=self.host,
                    pid=os.getpid(),
                    app=self.settings.app,
                )
            )
        except psycopg.errors.InsufficientPrivilege as exc:
            log_event(
                log,
                logging.WARNING,
                "worker.tasks_not_published",
                worker_id=self.worker_id,
                error=first_line(exc),
                hint="grant the worker role INSERT, UPDATE and SELECT on task_defaults and "
                "task_publications (queue-ctl roles prints the grants)",
            )
            return 0

    def _check_reachable(self) -> None:
        """Exit 69 (DatabaseUnavailable) if the database stays unreachable for ``connect_retry_s``.

        The daemons' one start-up wait (:func:`queue_engine.daemon.wait_for_database`):
        one backoff, and the last wait ends at the deadline.
        """

        def announce(exc: DatabaseUnavailable) -> None:
            log_event(
                log,
                logging.WARNING,
                "worker.db_unreachable",
                error=str(exc),
                wait_s=self.settings.connect_retry_s,
            )

        wait_for_database(
            lambda: connect(self.settings.dsn).close(),
            retry_s=self.settings.connect_retry_s,
            stopping=self._stopping.is_set,
            on_first_failure=announce,
            clock=self._clock,
            sleep=self._interruptible_sleep,
        )

    def _interruptible_sleep(self, seconds: float) -> None:
        if self._sleep is time.sleep:
            self._stopping.wait(seconds)
        else:
            self._sleep(seconds)
        if self.stopping:
            raise StopRequested()

    def _shutdown(self) -> None:
        if self._registered:
            self.liveness.stopping()
        self._watchdog.stop()
        self._heartbeat.stop()
        self.runner.close()
        if not self._registered:  # stopped (or failed) before it ever worked
            self.connection.drop()
            return
        give_back = self.jobs.take_unstarted()
        if self.jobs.pending or give_back:
            try:
                self.flusher.flush(
                    extra=give_back,
                    claim_limit=0,
                    attempts=SHUTDOWN_DB_ATTEMPTS,
                    deadline=(self._stop_at or self._clock()) + self.settings.shutdown_grace_s,
                )
            except Exception as exc:
                log_event(
                    log,
                    logging.ERROR,
                    "worker.shutdown_flush_failed",
                    worker_id=self.worker_id,
                    error=first_line(exc),
                    outcomes=len(self.jobs.pending) + len(give_back),
                )
        try:
            self.connection.run(
                lambda conn: store.mark_stopped(conn, self.schema, worker_id=self.worker_id),
                attempts=2,
            )
        except Exception as exc:
            log.debug("could not mark the worker stopped: %s", exc)
        self.connection.drop()
        log_event(
            log, logging.INFO, "worker.stopped", worker_id=self.worker_id, jobs=self.jobs_done
        )

    def _on_connect(self) -> None:
        """A new session: the scale slot died with the old one; look for work and controls."""
        self.gate.session_lost()
        self._wake.set()  # jobs may have been enqueued while we were not listening

    # -- main loop -----------------------------------------------------------

    def _main_loop(self) -> None:
        prefetch = self.settings.prefetch
        flush_interval_s = self.settings.flush_interval_s
        jobs = self.jobs
        recycler = self.recycler
        stopping = self._stopping.is_set
        mark_alive = self.liveness.mark_alive
        run = self.runner.run
        idle_poll = False
        while not stopping():
            mark_alive()
            self._apply_controls(idle=idle_poll)
            # Between jobs, never inside the claim: the hot path stays one statement.
            if stopping() or self._recycle_due():
                break
            if not jobs.ready:
                if idle_poll and not jobs.pending and not self._any_due():
                    # A safety poll found nothing due: no claim statement at all.
                    idle_poll = not self._wait_for_work(recycler.cap_wait(self.idle_poll_s()))
                    continue
                idle_poll = False
                self._wake.clear()
                if self.gate.may_claim():
                    claimed = self.flusher.flush(claim_limit=recycler.claim_room(prefetch, 0))
                else:
                    claimed = self.flusher.flush(claim_limit=0) if jobs.pending else 0
                if not claimed:
                    throttled = self.gate.throttled
                    wait_s = self.gate.rate_wait_s() if throttled else self.idle_poll_s()
                    # An idle worker ages too (cap_wait). A wait that times out
                    # is a safety poll: the next round probes before it claims.
                    woken = self._wait_for_work(recycler.cap_wait(wait_s))
                    idle_poll = not woken and not throttled
                    continue
            elif jobs.pending and self._clock() - jobs.pending_since >= flush_interval_s:
                # Long jobs: do not leave finished jobs looking "running" for long.
                held = len(jobs.ready)
                self.flusher.flush(claim_limit=recycler.claim_room(prefetch - held, held))
            if stopping():
                break
            run(jobs.ready.popleft())
            recycler.job_done()

    def _recycle_due(self) -> bool:
        """True when a recycling limit is reached: log why and stop as after a SIGTERM.

        The stop gives back the prefetched jobs that did not start and flushes
        the held outcomes (:meth:`_shutdown`); :meth:`run` then returns 79.
        """
        if self.recycler.check() is None:
            return False
        log_event(
            log,
            logging.INFO,
            "worker.recycle",
            worker_id=self.worker_id,
            queue=self.settings.queue,
            **self.recycler.log_fields(),
            prefetched=len(self.jobs.ready),
            exit_code=int(ExitCode.RECYCLE),
        )
        self.stop()
        return True

    def _apply_controls(self, *, idle: bool = False) -> None:
        """Act on the controls between jobs: stop, or give back prefetched jobs when parked.

        ``idle``: the worker is back from a safety poll that found nothing
        (not from a NOTIFY or a job): its periodic re-read may wait longer.
        """

        step = self.gate.refresh(self._clock(), before_release=self._flush_pending, idle=idle)
        if step.stop:
            self.stop()
        elif step.parked and self.jobs.ready:
            self.flusher.flush(claim_limit=0, extra=self.jobs.take_unstarted())

    def _flush_pending(self) -> None:
        """Write the held outcomes now (before a scale slot is given up)."""
        if self.jobs.pending:
            self.flusher.flush(claim_limit=0)

    def _wait_for_work(self, timeout_s: float | None = None) -> bool:
        """Block until a NOTIFY for our queue or controls, ``timeout_s`` (the poll interval), or stop.

        True when a wake-up (NOTIFY, reconnect) ended the wait, False when it timed out.
        """
        deadline = self._clock() + (self.settings.poll_s if timeout_s is None else timeout_s)
        while not self.stopping and not self._wake.is_set():
            now = self._clock()
            self.liveness.mark_alive()
            remaining = deadline - now
            if remaining <= 0:
                return False
            self.connection.listen(min(remaining, WAIT_SLICE_S))
        return self._wake.is_set()

    def _any_due(self) -> bool:
        """The idle poll's probe: is anything due on the queue? (It counts the idle workers too.)"""
        queue = self.settings.queue
        fresh_s = 3 * self.settings.heartbeat_s
        due, idle = self.connection.run(
            lambda conn: store.any_due(conn, self.schema, queue=queue, fresh_s=fresh_s)
        )
        self.idle_workers = max(1, idle)
        return due

    def idle_poll_s(self) -> float:
        """Seconds to the next safety poll: the queue's idle workers share the poll rate (:mod:`.idle`)."""
        s = self.settings
        return poll_interval(s.poll_s, s.queue_poll_rate, self.idle_workers, self._rand)

    def _on_notify(self, notify: psycopg.Notify) -> None:
        if notify.channel == self.jobs_channel:
            if notify.payload == self.settings.queue:
                self._wake.set()
        elif notify.channel == self.controls_channel:
            if notify.payload in (self.settings.queue, "*"):
                self.gate.mark_dirty()
                self._wake.set()
        elif notify.channel == self.cancel_channel:
            try:
                job_id = int(notify.payload)
            except ValueError:
                return
            self.jobs.mark_canceled([job_id])

    # -- what the heartbeat thread calls (HeartbeatTarget) -----------------------------

    def job_running(self) -> bool:
        """True while a handler executes."""
        return self.jobs.current is not None

    def progress_pending(self) -> bool:
        """True when some held job has progress not yet written."""
        return self.jobs.progress_pending()

    def poll_notifications(self) -> None:
        """Read notifications already on the socket (a cancel NOTIFY), never waiting."""
        self.connection.poll_notifications()

    def beat(self) -> None:
        """Heartbeat: worker row, leases and progress of held jobs, cancel flags."""
        self.renewer.beat()

    def beat_period_s(self) -> float:
        """How often to beat now: ``heartbeat_s``, or less for a held job's short lease."""
        return self.renewer.period_s()

    def systemd_tick(self) -> None:
        """``STATUS=`` on change and ``WATCHDOG=1`` while healthy (see :class:`.Liveness`)."""
        self.liveness.tick(self._status_text, busy=self.jobs.current is not None)

    def _state(self, busy: bool) -> str:
        """The state shown in ``queue-ctl workers``: stopping, busy, parked or idle."""
        return self.gate.state(busy=busy, stopping=self.stopping)

    def _status_text(self) -> str:
        current = self.jobs.current
        queue = self.settings.queue
        if self.connection.reconnecting:
            return f"reconnecting to the database (queue {queue})"
        if self.recycler.reached is not None:
            return f"recycling: {self.recycler.reached.describe()}"
        if self.stopping:
            return "stopping" + (f", waiting for job {current.job.id}" if current else "")
        if current is not None:
            return f"running job {current.job.id} ({current.job.task}) on queue {queue}"
        if self.gate.parked:
            return f"parked ({self.gate.parked}) on queue {queue}"
        return f"idle on queue {queue}, {self.jobs_done} jobs done"

    # -- what the watchdog thread calls ----------------------------------------------

    def _record_trip(self, armed: ArmedJob, trip: Trip) -> None:
        self._trips.record(armed, trip)

    def _stopped_by_watchdog(self) -> None:
        """The SIGTERM grace ran out and the job was given back: the process exits 0 next."""
        self.liveness.stopping()
        log_event(
            log, logging.INFO, "worker.stopped", worker_id=self.worker_id, jobs=self.jobs_done
        )
