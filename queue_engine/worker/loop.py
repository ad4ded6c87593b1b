"""The claim worker's main loop: claim, execute, finish; one job at a time.

Why this module is long: it wires the worker's parts (connection, gate,
flush, runner, renewal, liveness, recycling, watchdog) and holds the main
loop and the idle wait; every behaviour lives in a part, and what remains
here is the ordering between them, which reads best in one place.

The process's life (signals, waiting for the database, registration, the
heartbeat, systemd, the ordered stop) is the daemons' shared
:class:`~queue_engine.daemon.DaemonRuntime`, as for the orchestrator and the
scheduler; the worker gives it what only a worker has: its *prepare* (wait
for the schema), its beat target (:class:`~.renewal.Renewer`, whose cadence
writes progress, renews short leases and polls for cancels between beats),
its health gate (:class:`~.liveness.Liveness`), two one-off steps (publish
the tasks' defaults at start; give back and flush what it holds at stop), the
job watchdog, and its *foreground*: the main loop, on the main thread, which
returns the exit code (79 after a recycling limit).

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
- :mod:`.renewal`: the heartbeat's target (worker row, leases, progress,
  cancels) and its period;
- :mod:`.watchdog`: ends a job the handler cannot or will not end;
- :mod:`.deadline`: ends the process when a handler holding the GIL freezes
  every thread, the watchdog's included (armed with the watchdog);
- :mod:`.liveness`: the health gate of the systemd pings, and what a
  watchdog trip writes;
- :mod:`.handler_connections`: the pooled connection ``ctx.connect()`` lends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from queue_engine.daemon import DaemonRuntime, Hooks, StopRequested, process_id
from queue_engine.daemon.pooler import refuse_shared_sessions
from queue_engine.daemon.service import REAL_TIMING, Timing
from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import connect, first_line
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.logs import log_event
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, wait_for_schema
from queue_engine.producer import task_publications
from queue_engine.producer.tasks import TaskRegistry
from queue_engine.worker import store
from queue_engine.worker.connection import WorkerConnection
from queue_engine.worker.deadline import HardDeadline, process_timer
from queue_engine.worker.flush import Flusher
from queue_engine.worker.gate import DbGateStore, Gate
from queue_engine.worker.idle import poll_interval
from queue_engine.worker.jobs import HeldJobs
from queue_engine.worker.liveness import Liveness, TripRecorder
from queue_engine.worker.ratewait import RateDue
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
        timing: Timing = REAL_TIMING,
        exit: Callable[[int], object] = os._exit,
        rss_mb: Callable[[], float | None] = process_rss_mb,
    ) -> None:
        """``exit`` ends the process when the job watchdog trips, or on a second signal.

        Tests may replace it, and ``timing`` (clock, waits, the random source
        of the recycler's spread and of the idle poll); ``rss_mb`` is the
        recycler's RSS probe (:class:`~.recycle.Recycler`).
        """
        self.settings = settings
        self.tasks = tasks
        self.worker_id = worker_id or process_id("worker")
        self.schema = settings.schema
        self.host = socket.gethostname()
        self.timing = timing
        self._clock = timing.clock
        #: Set by the first stop request (a signal, :meth:`stop`, a recycling limit,
        #: an operator's stop); the runtime's stop event, which every part heeds.
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._stop_at: float | None = None
        self._stop_now_seen = False
        self._published = 0
        #: Idle workers of the queue at the last probe (this one included).
        self.idle_workers = 1
        self.recycler = Recycler(
            RecycleLimits(settings.max_jobs, settings.max_rss_mb, settings.max_age_s),
            clock=timing.clock,
            rss_mb=rss_mb,
            rand=timing.rand,
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
        self.jobs = HeldJobs(
            self._watchdog,
            worker_id=self.worker_id,
            zombie_grace_s=settings.zombie_grace_s,
            clock=timing.clock,
        )
        #: When a rated key's token is due, as the last claims reported it.
        self.rate_due = RateDue(timing.clock)
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
            mark_alive=lambda: self.liveness.mark_alive(),
            on_notice=self.rate_due.on_notice,
            reconnect_max_s=settings.reconnect_max_s,
            timing=timing,
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
            clock=timing.clock,
            publish_telemetry=settings.telemetry_notify == "on",
            idle_beat_s=idle_beat_s(settings.heartbeat_s, settings.dead_after()),
            on_stop_now=self._stop_now,
        )
        self.runtime = DaemonRuntime(
            "worker",
            dsn=settings.dsn,
            schema=self.schema,
            status=self._status_text,
            heartbeat_s=settings.heartbeat_s,
            connect_retry_s=settings.connect_retry_s,
            healthy=lambda: self.liveness.healthy(),
            started_fields=self._started_fields,
            stopped_fields=lambda: {"jobs": self.jobs_done},
            id_field="worker_id",
            worker_id=self.worker_id,
            beat_target=self.renewer,
            on_stop=self._on_stop,
            stop_event=self._stopping,
            exit=exit,
            timing=timing,
        )
        self.liveness = Liveness(
            self._watchdog,
            busy=self.renewer.job_running,
            within_s=self.runtime.systemd.watchdog_s,
            clock=timing.clock,
        )
        # Started in this order after the registration, stopped in reverse: the
        # watchdog first, then what the worker holds is given back and flushed.
        self.runtime.services = [
            Hooks(stop=self._give_back_and_flush),
            Hooks(start=self._publish_tasks),
            self._watchdog,
        ]
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
        self.jobs_channel = queries.jobs_channel(self.schema)
        self.cancel_channel = queries.cancel_channel(self.schema)
        self.controls_channel = queries.controls_channel(self.schema)

    @property
    def jobs_done(self) -> int:
        """Outcomes the database applied since the start."""
        return self.flusher.jobs_done

    # -- lifecycle ---------------------------------------------------------

    def run(self) -> int:
        """Start, work until stopped, shut down cleanly; return the exit code.

        0 (``OK``) after a stop, 79 (``RECYCLE``) after a recycling limit.
        Installs no signal handler: any thread may run a worker (tests, the
        testing kit's drain); :meth:`stop` stops it.
        """
        return self.runtime.run(prepare=self._prepare, foreground=self._work)

    def main(self) -> int:
        """:meth:`run` as the console script's process: SIGTERM/SIGINT stop it (main thread)."""
        return self.runtime.main(prepare=self._prepare, foreground=self._work)

    def stop(self) -> None:
        """Ask the worker to stop: no new claims; the current job finishes. Safe to call twice."""
        self.runtime.request_stop()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called (or a signal, a recycling limit, a control)."""
        return self._stopping.is_set()

    def _on_stop(self) -> None:
        """The first stop request: the running job's shutdown grace starts, the loop wakes."""
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
        self._wake.set()

    def _stop_now(self) -> None:
        """``queue-ctl stop --now`` (heartbeat thread): give the running job back, exit 0.

        The watchdog trips at its next tick (``give_back``: the job is queued
        again, attempt not counted, the row marked stopped) and ends the
        process with 0; idle, the stop is an ordinary one.
        """
        if self._stop_now_seen:
            return
        self._stop_now_seen = True
        current = self.jobs.current
        log_event(
            log,
            logging.WARNING if current else logging.INFO,  # a job is cut short, or none
            "worker.stop_now",
            worker_id=self.worker_id,
            running_job=current.job.id if current else None,
        )
        self._watchdog.note_stop_now()
        self.stop()

    def _prepare(self) -> None:
        """Before registering: the database (exit 69 after ``connect_retry_s``), then the schema."""
        settings = self.settings
        self.runtime.wait_for_database(lambda: connect(settings.dsn).close())
        refuse_shared_sessions(settings.dsn, "queue-claim-worker")
        wait_for_schema(
            settings.dsn, ENGINE_SCHEMA_VERSION, schema=self.schema, sleep=self.runtime.sleep
        )

    def _started_fields(self) -> dict[str, Any]:
        """The fields of ``worker.started``."""
        return {
            "queue": self.settings.queue,
            "prefetch": self.settings.prefetch,
            "tasks": ",".join(self.tasks.names()),
            "published": self._published,
            "synchronous_commit": self.settings.synchronous_commit,
            **self.recycler.limits.log_fields(),
        }

    def _publish_tasks(self) -> None:
        """Publish the registry's defaults, so that every enqueue path applies them.

        A role without the grants of migration 0028 (roles made before it and
        not granted since) is told so in a warning; the worker runs all the
        same, and enqueues elsewhere keep the defaults published before.
        """
        try:
            self._published = self.connection.run(
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

    def _work(self) -> int:
        """The foreground: the main loop until a stop; 79 after a recycling limit, else 0."""
        self.recycler.start()
        with contextlib.suppress(StopRequested):  # a stop while reconnecting
            self._main_loop()
        return ExitCode.RECYCLE if self.recycler.reached is not None else ExitCode.OK

    def _give_back_and_flush(self) -> None:
        """At stop: give back the prefetched jobs that did not start, flush the held outcomes.

        Bounded by the shutdown grace (counted from the stop request) and
        :data:`SHUTDOWN_DB_ATTEMPTS` when the database is down; what cannot be
        written is recovered by the jobs' leases.
        """
        self.runner.close()
        give_back = self.jobs.take_unstarted()
        if not (self.jobs.pending or give_back):
            return
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
                self.rate_due.clear()
                if self.gate.may_claim():
                    claimed = self.flusher.flush(claim_limit=recycler.claim_room(prefetch, 0))
                else:
                    claimed = self.flusher.flush(claim_limit=0) if jobs.pending else 0
                if not claimed:
                    throttled = self.gate.throttled
                    # A rated key's token due soon (worker/ratewait.py): claim
                    # again then, neither polling nor sleeping a whole poll.
                    key_wait_s = None if throttled else self.rate_due.take(self.idle_poll_s())
                    if throttled:
                        wait_s = self.gate.rate_wait_s()
                    else:
                        wait_s = self.idle_poll_s() if key_wait_s is None else key_wait_s
                    # An idle worker ages too (cap_wait). A wait that times out
                    # is a safety poll: the next round probes before it claims.
                    woken = self._wait_for_work(recycler.cap_wait(wait_s))
                    idle_poll = not woken and not throttled and key_wait_s is None
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
        the held outcomes (:meth:`_give_back_and_flush`); :meth:`run` then returns 79.
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
        return poll_interval(s.poll_s, s.queue_poll_rate, self.idle_workers, self.timing.rand)

    def _on_notify(self, notify: psycopg.Notify) -> None:
        if notify.channel == self.jobs_channel:
            if notify.payload == self.settings.queue:
                self._wake.set()
        elif notify.channel == self.controls_channel:
            if notify.payload in (self.settings.queue, "*"):
                self.gate.mark_dirty()
                self._wake.set()
                if self.jobs.current is not None:  # a hard stop must not wait for the job
                    self.renewer.beat_soon()
        elif notify.channel == self.cancel_channel:
            try:
                job_id = int(notify.payload)
            except ValueError:
                return
            self.jobs.mark_canceled([job_id])

    # -- what the heartbeat thread calls ----------------------------------------------

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
        self.runtime.systemd.stopping()
        log_event(
            log, logging.INFO, "worker.stopped", worker_id=self.worker_id, jobs=self.jobs_done
        )
