"""The claim worker's main loop: claim, execute, finish; one job at a time.

One database connection carries everything the worker itself does (LISTEN,
claim, finish, heartbeat), guarded by one lock because the heartbeat thread
shares it. A job costs one statement at steady state: the outcome of the job
just run is flushed in the same statement that claims the next one
(``finish_and_claim_jobs.sql``). With ``prefetch`` > 1 the worker holds up to
that many claimed jobs, runs them one after another and flushes their outcomes
together (at the latest every ``flush_interval_s``), so the statements per job
drop further while still one handler executes at a time.

Idle, the worker waits for a NOTIFY on ``<schema>.jobs`` whose payload is its
queue, and polls every ``poll_s`` in case a notification was lost (delayed jobs
are found by that poll too). A dropped connection is re-opened with capped,
jittered backoff; pending outcomes are kept and re-sent, which is safe because
every finish is guarded by the attempt it claimed.

Liveness (DESIGN.md, "Liveness model"): every execution is watched by the
:class:`~queue_engine.worker.watchdog.JobWatchdog` thread (wall-clock budget,
opt-in stall timeout, ignored cancels, zombies, the SIGTERM grace), armed in
process at no cost per job. A job the heartbeat finds is no longer ours is a
zombie: it is stopped at its next checkpoint (or hard-stopped after a short
grace) and its outcome is never sent. After every reconnect the worker
re-takes its lock-key advisory locks (or gives the job up as a zombie) and
gives back jobs a lost reply had claimed for it. Under systemd it sends
``READY=1``, ``STATUS=`` lines, ``WATCHDOG=1`` (only while its threads are
alive) and ``STOPPING=1``.

Operator controls (DESIGN.md, "Concurrency controls"; docs/operations.md):
the claim statement enforces pause, scale, park and the rate limit by itself;
the worker keeps a copy of its controls (re-read on a NOTIFY on
``<schema>.controls``, after a reconnect and once per heartbeat period) to
know whether to claim at all, to take or give up a scale slot (a session
advisory lock: at most ``scale_limit`` workers of a queue hold one), to show
``parked`` in its row, to retry when a rate token is due, and to stop (exit
0) after its current job when an operator asks.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psutil
import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from queue_engine import sql as queries
from queue_engine.context import ClaimedJob, JobContext
from queue_engine.db import connect, first_line
from queue_engine.errors import DatabaseUnavailable
from queue_engine.logs import mask_secrets
from queue_engine.migrate import ENGINE_SCHEMA_VERSION, wait_for_schema
from queue_engine.service import log_event
from queue_engine.systemd import SystemdNotifier, watchdog_interval_s
from queue_engine.tasks import TaskRegistry
from queue_engine.telemetry import GpuProbe, host_telemetry
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store
from queue_engine.worker.executor import Executor
from queue_engine.worker.heartbeat import Heartbeat
from queue_engine.worker.outcomes import Outcome
from queue_engine.worker.settings import WorkerSettings
from queue_engine.worker.watchdog import (
    ArmedJob,
    Graces,
    JobWatchdog,
    Trip,
    job_budget_s,
    stall_timeout_s,
)

log = logging.getLogger("queue_engine.worker")

T = TypeVar("T")

#: Reconnect backoff: first delay, cap, and jitter fraction.
RECONNECT_BASE_S = 0.2
RECONNECT_MAX_S = 15.0
RECONNECT_JITTER = 0.3
#: Idle waits are cut in slices this long, so a stop request is seen quickly.
WAIT_SLICE_S = 0.25
#: Attempts to write the last outcomes at shutdown when the database is down
#: (and at most until the shutdown grace has run out, counted from the stop).
SHUTDOWN_DB_ATTEMPTS = 8
#: The watchdog's own connection: connect and statement timeouts (seconds).
RECORD_CONNECT_TIMEOUT_S = 5
RECORD_STATEMENT_TIMEOUT_MS = 5000
#: How often a claim that lost a lock-key race is retried in a row.
CLAIM_RACE_RETRIES = 5
#: Shortest and longest wait for a rate token before claiming again (seconds).
RATE_WAIT_MIN_S = 0.005
#: Statement errors that abort a finish-and-claim without any effect: retry.
RETRYABLE_CLAIM_ERRORS = (
    pg_errors.UniqueViolation,
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
)


def make_worker_id() -> str:
    """``host:pid:random``: unique per process, readable in ``queue-ctl workers``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def backoff_s(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """Reconnect delay after ``attempt`` failures: exponential, capped, jittered."""
    raw: float = min(RECONNECT_MAX_S, RECONNECT_BASE_S * 2.0 ** min(attempt, 16))
    return raw * (1 + RECONNECT_JITTER * (2 * rand() - 1))


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
    ) -> None:
        """``exit`` ends the process when the job watchdog trips (tests may replace it)."""
        self.settings = settings
        self.tasks = tasks
        self.worker_id = worker_id or make_worker_id()
        self.schema = settings.schema
        self.jobs_channel = queries.jobs_channel(self.schema)
        self.cancel_channel = queries.cancel_channel(self.schema)
        self.controls_channel = queries.controls_channel(self.schema)
        self.host = socket.gethostname()
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.RLock()  # guards self._conn: main loop + heartbeat thread
        self._conn: psycopg.Connection[Any] | None = None
        self._held_lock = threading.Lock()  # guards self._held (heartbeat iterates it)
        self._held: dict[int, HeldJob] = {}
        self._ready: deque[ClaimedJob] = deque()  # claimed, not started
        self._pending: list[Outcome] = []  # run, not yet flushed
        self._pending_since = 0.0
        self._current: HeldJob | None = None
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._executor = Executor()
        self._heartbeat = Heartbeat(self, heartbeat_s=settings.heartbeat_s)
        self._process = psutil.Process()
        self._gpu = GpuProbe()
        self._telemetry_at: float | None = None  # clock of the last telemetry sent
        self._systemd = SystemdNotifier()
        self._watchdog = JobWatchdog(
            self._record_trip,
            graces=Graces(
                cancel_s=settings.cancel_grace_s,
                zombie_s=settings.zombie_grace_s,
                shutdown_s=settings.shutdown_grace_s,
            ),
            exit=exit,
        )
        interval = watchdog_interval_s()
        self._ping_every_s = None if interval is None else interval / 2
        self._alive_within_s = 2 * interval if interval is not None else 0.0
        self._last_ping = 0.0
        self._main_mark = clock()  # the main loop's last sign of life (systemd watchdog)
        self._reconnecting = False
        self._status_sent: str | None = None
        self._stop_at: float | None = None
        self.jobs_done = 0
        self._registered = False
        # Operator controls: the last read, whether to re-read, the scale slot held.
        self._controls = store.WorkerControls()
        self._controls_dirty = True
        self._controls_at: float | None = None
        self._slot: int | None = None
        self._parked: str | None = None  # why this worker does not claim: park, scale
        self._throttled = False
        self._warm_key = settings.warm_key

    # -- lifecycle ---------------------------------------------------------

    def stop(self) -> None:
        """Ask the worker to stop: no new claims; the current job finishes. Safe to call twice."""
        if not self._stopping.is_set():
            self._stop_at = self._clock()
            self._watchdog.note_stop()
            log_event(
                log,
                logging.INFO,
                "worker.stopping",
                worker_id=self.worker_id,
                grace_s=self.settings.shutdown_grace_s,
                running_job=self._current.job.id if self._current else None,
            )
        self._stopping.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    def run(self) -> int:
        """Start, work until stopped, shut down cleanly; return the process exit code (0)."""
        try:
            self._start()
            self._main_loop()
        except _StopRequested:
            pass
        finally:
            self._shutdown()
        return 0

    def _start(self) -> None:
        self._check_reachable()
        wait_for_schema(
            self.settings.dsn,
            ENGINE_SCHEMA_VERSION,
            schema=self.schema,
            sleep=self._interruptible_sleep,
        )
        self._db(lambda conn: None)  # connect, LISTEN, register
        self._registered = True
        self._watchdog.start()
        self._heartbeat.start()
        self._systemd.ready(f"worker {self.worker_id} on queue {self.settings.queue}")
        log_event(
            log,
            logging.INFO,
            "worker.started",
            worker_id=self.worker_id,
            queue=self.settings.queue,
            prefetch=self.settings.prefetch,
            tasks=",".join(self.tasks.names()),
            synchronous_commit=self.settings.synchronous_commit,
        )

    def _check_reachable(self) -> None:
        """Exit 69 (DatabaseUnavailable) if the database stays unreachable for ``connect_retry_s``."""
        deadline = self._clock() + self.settings.connect_retry_s
        attempt = 0
        while True:
            try:
                connect(self.settings.dsn).close()
                return
            except DatabaseUnavailable as exc:
                if self._clock() >= deadline or self.stopping:
                    raise
                log_event(
                    log, logging.WARNING, "worker.db_unreachable", error=str(exc), attempt=attempt
                )
            self._interruptible_sleep(backoff_s(attempt))
            attempt += 1

    def _interruptible_sleep(self, seconds: float) -> None:
        if self._sleep is time.sleep:
            self._stopping.wait(seconds)
        else:
            self._sleep(seconds)
        if self.stopping:
            raise _StopRequested()

    def _shutdown(self) -> None:
        if self._registered:
            self._systemd.stopping()
        self._watchdog.stop()
        self._heartbeat.stop()
        self._executor.close()
        if not self._registered:  # stopped (or failed) before it ever worked
            with self._lock:
                self._drop_conn()
            return
        give_back = self._take_unstarted()
        if self._pending or give_back:
            try:
                self._flush(
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
                    outcomes=len(self._pending) + len(give_back),
                )
        try:
            self._db(
                lambda conn: store.mark_stopped(conn, self.schema, worker_id=self.worker_id),
                attempts=2,
            )
        except Exception as exc:
            log.debug("could not mark the worker stopped: %s", exc)
        with self._lock:
            self._drop_conn()
        log_event(
            log, logging.INFO, "worker.stopped", worker_id=self.worker_id, jobs=self.jobs_done
        )

    # -- the connection ----------------------------------------------------

    def _open_conn(self) -> psycopg.Connection[Any]:
        conn = connect(self.settings.dsn, application_name="queue-claim-worker")
        try:
            store.configure_session(conn, synchronous_commit=self.settings.synchronous_commit)
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.jobs_channel)))
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.cancel_channel)))
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.controls_channel)))
            store.register(
                conn,
                self.schema,
                worker_id=self.worker_id,
                queue=self.settings.queue,
                host=self.host,
                pid=os.getpid(),
                state="idle",
            )
            self._after_connect(conn)
        except BaseException:
            conn.close()
            raise
        # A scale slot is a session lock: it died with the old session. Controls
        # may have changed while we were not listening: read them again.
        self._slot = None
        self._controls_dirty = True
        # Jobs may have been enqueued while we were not listening: look once.
        self._wake.set()
        return conn

    def _after_connect(self, conn: psycopg.Connection[Any]) -> None:
        """Repair what a lost session took with it: orphaned claims and advisory locks.

        Runs under the connection lock (the main loop is not half-way through
        a finish-and-claim's bookkeeping). The advisory lock of a running keyed
        job died with the old session: take it again; if another session took
        it meanwhile, the job can no longer be run safely beside it, so the
        execution is given up as a zombie (stopped, outcome not written).
        """
        with self._held_lock:
            held = list(self._held.values())
        released = store.release_orphans(
            conn, self.schema, worker_id=self.worker_id, held_ids=[h.job.id for h in held]
        )
        if released:
            log_event(
                log,
                logging.WARNING,
                "worker.orphans_released",
                worker_id=self.worker_id,
                job_ids=",".join(map(str, released)),
                reason="running under this worker's id but not held by it: a claim whose "
                "reply was lost with the connection, or a finish the server lost in a crash",
            )
        for h in held:
            key = h.job.lock_key
            if not h.advisory_locked or key is None or h.lost:
                continue
            if store.try_lock_key(conn, self.schema, key):
                continue
            h.advisory_locked = False
            self._mark_lost(
                h,
                "its lock key's advisory lock was taken by another session "
                "while this worker was reconnecting",
            )

    def _mark_lost(self, held: HeldJob, reason: str) -> None:
        """The job is no longer ours: stop its execution (a zombie) and never write its outcome."""
        if held.lost:
            return
        held.lost = True
        self._watchdog.note_lost(held.job.id, held.job.attempt)
        log_event(
            log,
            logging.ERROR,
            "job.lease_lost",
            job_id=held.job.id,
            attempt=held.job.attempt,
            worker_id=self.worker_id,
            running=held is self._current,
            reason=f"{reason}; it is stopped at its next checkpoint (hard stop, exit 77, "
            f"after {self.settings.zombie_grace_s:g}s) and its outcome is not written",
        )

    def _drop_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:  # a broken connection may fail to close
                log.debug("closing the broken connection failed: %s", exc)

    def _db(
        self,
        fn: Callable[[psycopg.Connection[Any]], T],
        *,
        attempts: int | None = None,
        deadline: float | None = None,
    ) -> T:
        """Run ``fn`` on the worker connection, reconnecting with backoff on connection errors.

        ``attempts`` bounds the tries (None: until it works or the worker
        stops), and so does ``deadline`` (a time on the worker's clock).
        """
        failures = 0
        while True:
            with self._lock:
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = self._open_conn()
                        if failures or self._reconnecting:
                            log_event(
                                log, logging.INFO, "worker.reconnected", worker_id=self.worker_id
                            )
                        self._reconnecting = False
                    return fn(self._conn)
                except (psycopg.OperationalError, DatabaseUnavailable) as exc:
                    self._drop_conn()
                    self._reconnecting = True
                    error = first_line(exc)
            failures += 1
            if threading.current_thread() is threading.main_thread():
                self._main_mark = self._clock()
            if (attempts is not None and failures >= attempts) or (
                deadline is not None and self._clock() >= deadline
            ):
                raise DatabaseUnavailable(f"lost the database: {error}")
            delay = backoff_s(failures - 1)
            if deadline is not None:
                delay = max(0.0, min(delay, deadline - self._clock()))
            log_event(
                log,
                logging.WARNING,
                "worker.db_error",
                worker_id=self.worker_id,
                error=error,
                retry_in_s=round(delay, 2),
            )
            if attempts is None and self.stopping:
                raise _StopRequested()
            self._stopping.wait(delay) if self._sleep is time.sleep else self._sleep(delay)

    # -- main loop -----------------------------------------------------------

    def _main_loop(self) -> None:
        prefetch = self.settings.prefetch
        while not self.stopping:
            self._main_mark = self._clock()
            self._apply_controls()
            if self.stopping:
                break
            if not self._ready:
                self._wake.clear()
                if self._may_claim():
                    claimed = self._flush(claim_limit=prefetch)
                else:
                    claimed = self._flush(claim_limit=0) if self._pending else 0
                if not claimed:
                    self._wait_for_work(self._rate_wait_s() if self._throttled else None)
                    continue
            elif (
                self._pending
                and self._clock() - self._pending_since >= self.settings.flush_interval_s
            ):
                # Long jobs: do not leave finished jobs looking "running" for long.
                self._flush(claim_limit=prefetch - len(self._ready))
            if self.stopping:
                break
            self._execute(self._ready.popleft())

    def _wait_for_work(self, timeout_s: float | None = None) -> None:
        """Block until a NOTIFY for our queue or controls, ``timeout_s`` (the poll interval), or stop."""
        deadline = self._clock() + (self.settings.poll_s if timeout_s is None else timeout_s)
        while not self.stopping and not self._wake.is_set():
            self._main_mark = now = self._clock()
            remaining = deadline - now
            if remaining <= 0:
                return
            timeout = min(remaining, WAIT_SLICE_S)

            def listen(conn: psycopg.Connection[Any], timeout: float = timeout) -> None:
                for notify in conn.notifies(timeout=timeout, stop_after=1):
                    self._on_notify(notify)

            self._db(listen)

    def _on_notify(self, notify: psycopg.Notify) -> None:
        if notify.channel == self.jobs_channel:
            if notify.payload == self.settings.queue:
                self._wake.set()
        elif notify.channel == self.controls_channel:
            if notify.payload in (self.settings.queue, "*"):
                self._controls_dirty = True
                self._wake.set()
        elif notify.channel == self.cancel_channel:
            try:
                job_id = int(notify.payload)
            except ValueError:
                return
            with self._held_lock:
                held = self._held.get(job_id)
                if held is not None:
                    held.canceled = True
            if held is not None:
                self._watchdog.note_cancel(job_id)

    # -- operator controls -------------------------------------------------------

    def _apply_controls(self) -> None:
        """Re-read the controls when told to (NOTIFY, reconnect) or their period passed; act.

        Runs in the main loop between jobs only: a control never interrupts a
        running job. A stop request stops the worker (exit 0) here; a park, or
        a scale limit with no free slot, gives back prefetched jobs and stops
        claiming; a slot above a lowered limit is given up for a lower one.
        """
        now = self._clock()
        # A slot that frees (its holder exited or died) sends no notification:
        # a worker parked for want of one looks again at every poll.
        period = self.settings.poll_s if self._parked == "scale" else self.settings.heartbeat_s
        if not (
            self._controls_dirty or self._controls_at is None or now - self._controls_at >= period
        ):
            return
        self._controls_dirty = False
        self._controls_at = now
        previous = self._controls
        controls = self._controls = self._db(
            lambda conn: store.read_controls(
                conn,
                self.schema,
                worker_id=self.worker_id,
                queue=self.settings.queue,
                host=self.host,
            )
        )
        if controls != previous:
            log_event(
                log,
                logging.DEBUG,
                "worker.controls_changed",
                worker_id=self.worker_id,
                queue=self.settings.queue,
                paused=controls.paused,
                scale_limit=controls.scale_limit,
                rate_limit=controls.rate_limit,
                parked=controls.parked,
                stop_requested=controls.stop_requested,
            )
        if controls.stop_requested:
            log_event(
                log,
                logging.INFO,
                "worker.stop_requested",
                worker_id=self.worker_id,
                queue=self.settings.queue,
                reason="queue-ctl stop: exiting 0 now that no job runs",
            )
            self.stop()
            return
        self._fit_scale_slot(controls.scale_limit)
        reason = "park" if controls.parked else None
        if reason is None and controls.scale_limit is not None and self._slot is None:
            reason = "scale"
        if reason != self._parked:
            self._parked = reason
            if reason is not None and self._ready:
                self._flush(claim_limit=0, extra=self._take_unstarted())
            log_event(
                log,
                logging.INFO,
                "worker.parked" if reason else "worker.unparked",
                worker_id=self.worker_id,
                queue=self.settings.queue,
                host=self.host,
                reason=(
                    {
                        "park": "queue-ctl park names this worker or its host",
                        "scale": f"the queue's {controls.scale_limit} scale slots are all held",
                    }[reason]
                    if reason
                    else None
                ),
            )

    def _fit_scale_slot(self, limit: int | None) -> None:
        """Hold a scale slot below ``limit`` if one is free; none when there is no limit.

        A slot above a lowered limit is given up after the pending finishes
        are written (they end jobs that ran under it), so a worker that takes
        the slot over never overlaps them.
        """
        queue = self.settings.queue
        slot = self._slot
        if slot is not None and (limit is None or slot >= limit):
            if self._pending:
                self._flush(claim_limit=0)
            self._db(
                lambda conn: store.release_scale_slot(conn, self.schema, queue=queue, slot=slot)
            )
            self._slot = None
            log_event(
                log,
                logging.DEBUG,
                "worker.scale_slot_released",
                worker_id=self.worker_id,
                slot=slot,
            )
        if limit is not None and self._slot is None:
            self._slot = self._db(
                lambda conn: store.take_scale_slot(conn, self.schema, queue=queue, limit=limit)
            )
            if self._slot is not None:
                log_event(
                    log,
                    logging.DEBUG,
                    "worker.scale_slot_taken",
                    worker_id=self.worker_id,
                    slot=self._slot,
                    limit=limit,
                )

    def _may_claim(self) -> bool:
        """False while parked or paused (the claim would take nothing: skip the statement)."""
        return self._parked is None and not self._controls.paused

    def _rate_wait_s(self) -> float:
        """How long to wait before claiming again after the rate limit withheld jobs."""
        rate = self._controls.rate_limit
        if rate is None:  # a limit we have not read yet: look again soon
            self._controls_dirty = True
            return min(self.settings.poll_s, 0.1)
        return min(self.settings.poll_s, max(RATE_WAIT_MIN_S, 1.0 / rate))

    def _take_unstarted(self) -> list[Outcome]:
        """Give-back outcomes for every held job not started yet; the ready queue is emptied.

        Used at shutdown and when the worker parks: another worker may run them.
        """
        with self._held_lock:
            unstarted = [h.job for h in self._held.values() if not h.started]
        self._ready.clear()
        return [oc.released(job) for job in unstarted]

    # -- flushing outcomes and claiming ----------------------------------------

    def _flush(
        self,
        *,
        claim_limit: int,
        extra: list[Outcome] | None = None,
        attempts: int | None = None,
        deadline: float | None = None,
    ) -> int:
        """Send pending outcomes (plus ``extra``) and claim up to ``claim_limit``; return claimed."""
        if self._pending:
            self._drop_zombie_outcomes()
        outcomes = self._pending + (extra or [])
        with self._held_lock:
            lock_keyed = any(
                h.job.lock_key is not None
                for h in (self._held.get(o.job_id) for o in outcomes)
                if h is not None
            )
        if self.stopping:
            claim_limit = 0
        claimed = self._db(
            lambda conn: self._finish_and_claim(conn, outcomes, claim_limit),
            attempts=attempts,
            deadline=deadline,
        )
        self._pending = []
        if claimed < claim_limit and lock_keyed and not self.stopping:
            # The finished jobs' lock keys looked busy to that statement's snapshot:
            # look again now that they are free (a round trip only keyed jobs pay).
            claimed += self._db(
                lambda conn: self._finish_and_claim(conn, [], claim_limit - claimed)
            )
        return claimed

    def _drop_zombie_outcomes(self) -> None:
        """Never send the outcome of an attempt found no longer ours while it waited to be sent.

        (A reconnect after a server crash can find the server lost the claim
        or the finish: the heartbeat then reports the job lost.)
        """
        with self._held_lock:
            zombies = {
                o.job_id: h
                for o in self._pending
                if (h := self._held.get(o.job_id)) is not None
                and h.lost
                and h.job.attempt == o.attempt
            }
        if zombies:
            self._pending = [o for o in self._pending if o.job_id not in zombies]
            for held in zombies.values():
                self._forget_zombie(held, ran=True)

    def _finish_and_claim(
        self, conn: psycopg.Connection[Any], outcomes: list[Outcome], claim_limit: int
    ) -> int:
        """One finish-and-claim, recovering from a lost lock-key race; return the claimed count.

        Runs under the connection lock, bookkeeping included, so the heartbeat
        never sees a job half-way between held and finished.
        """
        common: dict[str, Any] = {"worker_id": self.worker_id, "queue": self.settings.queue}
        finished: dict[int, str] = {}
        claimed: list[ClaimedJob] = []
        to_send = outcomes
        for _ in range(CLAIM_RACE_RETRIES):
            try:
                result = store.finish_and_claim(
                    conn,
                    self.schema,
                    outcomes=to_send,
                    claim_limit=claim_limit,
                    lease_ttl_s=self.settings.lease_ttl_s,
                    gate=store.ClaimGate(
                        host=self.host,
                        slot=self._slot,
                        warm_key=self._warm_key,
                        affinity_wait_s=self.settings.affinity_wait_s,
                    ),
                    **common,
                )
            except RETRYABLE_CLAIM_ERRORS as exc:
                # The whole statement rolled back, finishes included: never lose them.
                log.debug("claim lost a race (%s); retrying", first_line(exc))
                if to_send:
                    finished.update(self._finish_one_by_one(conn, to_send))
                    to_send = []
                continue
            except psycopg.DatabaseError as exc:
                if isinstance(exc, psycopg.OperationalError) or not to_send:
                    raise
                # Some outcome cannot be stored (a value the database refuses):
                # store the others, and a failure saying why for that one.
                log.warning("finish refused (%s); finishing one by one", first_line(exc))
                finished.update(self._finish_one_by_one(conn, to_send))
                to_send = []
                continue
            finished.update(result.finished)
            claimed = result.claimed
            if claim_limit:
                self._throttled = result.throttled
            break
        with self._held_lock:
            done = [(o, self._held.pop(o.job_id, None)) for o in outcomes]
            for job in claimed:
                self._held[job.id] = HeldJob(job)
        for _outcome, held in done:
            if held is not None and held.advisory_locked and held.job.lock_key is not None:
                self._unlock_key(conn, held.job.lock_key)
        self._ready.extend(claimed)
        for outcome, held in done:
            self._log_outcome(outcome, held, finished.get(outcome.job_id))
        return len(claimed)

    def _unlock_key(self, conn: psycopg.Connection[Any], key: str) -> None:
        # After the finish has committed: a failure here must not re-run the finish
        # and claim (the caller's retry would). A lost session released the lock anyway.
        try:
            store.unlock_key(conn, self.schema, key)
        except psycopg.Error as exc:
            log.debug("releasing the advisory lock of %r failed: %s", key, exc)

    def _finish_one_by_one(
        self, conn: psycopg.Connection[Any], outcomes: list[Outcome]
    ) -> dict[int, str]:
        """Finish each outcome alone; one the database refuses becomes a failure that says why."""
        common: dict[str, Any] = {
            "worker_id": self.worker_id,
            "queue": self.settings.queue,
            "host": self.host,
        }
        finished: dict[int, str] = {}
        for outcome in outcomes:
            try:
                finished.update(store.finish_only(conn, self.schema, outcomes=[outcome], **common))
            except psycopg.DatabaseError as exc:
                if isinstance(exc, psycopg.OperationalError):
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
            "queue": self.settings.queue,
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

    # -- executing one job -------------------------------------------------------

    def _execute(self, job: ClaimedJob) -> None:
        with self._held_lock:
            held = self._held.get(job.id)
            if held is None:  # cannot happen: claimed jobs are held until flushed
                held = self._held[job.id] = HeldJob(job)
            held.started = True
            canceled = held.canceled or job.cancel_requested
        if held.lost:  # prefetched, then found no longer ours: never run it
            self._forget_zombie(held, ran=False)
            return
        definition = self.tasks.get(job.task)
        if definition is None:
            self._add_outcome(oc.unknown_task(job, self.tasks.names()))
            return
        if canceled:
            self._add_outcome(
                oc.Outcome(
                    job.id,
                    job.attempt,
                    "canceled",
                    "canceled",
                    message="canceled before it started",
                )
            )
            return
        if job.lock_key is not None and not self._take_lock_key(held):
            self._add_outcome(oc.released(job))
            return
        if log.isEnabledFor(logging.DEBUG):
            log_event(
                log,
                logging.DEBUG,
                "job.started",
                job_id=job.id,
                task=job.task,
                attempt=job.attempt,
                args=json.dumps(mask_secrets(job.args), default=str),
            )
        watchdog = self._watchdog
        ctx = JobContext(
            job,
            worker_id=self.worker_id,
            dsn=self.settings.dsn,
            schema=self.schema,
            report_progress=lambda data: self._report_progress(held, data),
            is_canceled=lambda: held.canceled or held.lost,
            beat=watchdog.beat,
        )
        self._current = held
        # Armed in process: the budget costs no statement. A cancel or a loss the
        # heartbeat saw just before arming is passed on now.
        watchdog.arm(
            job.id,
            job.attempt,
            budget_s=job_budget_s(
                job.timeout_s, definition.timeout_s, self.settings.default_timeout_s
            ),
            stall_s=stall_timeout_s(definition.stall_timeout_s),
        )
        if held.canceled:
            watchdog.note_cancel(job.id)
        if held.lost:
            watchdog.note_lost(job.id, job.attempt)
        started = time.perf_counter()
        try:
            result = self._executor.run(definition, job.args, ctx)
        except Exception as exc:
            outcome = oc.from_exception(
                job,
                exc,
                _elapsed_ms(started),
                retry=definition.retry,
                progress=self._take_progress(held),
            )
        else:
            outcome = oc.succeeded(job, result, _elapsed_ms(started), self._take_progress(held))
        finally:
            watchdog.disarm()
            self._current = None
            ctx.close()
        if job.affinity_key is not None:
            self._warm_key = job.affinity_key  # what it loaded, it now has warm
        if held.lost:
            self._forget_zombie(held, ran=True)
            return
        self._add_outcome(outcome)

    def _forget_zombie(self, held: HeldJob, *, ran: bool) -> None:
        """Drop a job that is no longer ours without sending any outcome for it."""
        with self._held_lock:
            if self._held.get(held.job.id) is held:
                del self._held[held.job.id]
        key = held.job.lock_key
        if held.advisory_locked and key is not None:
            held.advisory_locked = False
            # A lost session has released it already.
            with contextlib.suppress(DatabaseUnavailable):
                self._db(lambda conn: self._unlock_key(conn, key), attempts=1)
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

    def _add_outcome(self, outcome: Outcome) -> None:
        if not self._pending:
            self._pending_since = self._clock()
        self._pending.append(outcome)

    def _take_lock_key(self, held: HeldJob) -> bool:
        """Take the lock key's advisory lock, waiting while another session (a zombie) holds it.

        Returns False when the worker is asked to stop while waiting.
        """
        key = held.job.lock_key
        assert key is not None
        warned = False
        while not self._db(lambda conn: store.try_lock_key(conn, self.schema, key)):
            if not warned:
                log_event(
                    log,
                    logging.WARNING,
                    "job.lock_key_busy",
                    job_id=held.job.id,
                    lock_key=key,
                    reason="another session holds the advisory lock of this key "
                    "(a zombie of an earlier attempt?); waiting",
                )
                warned = True
            if self.stopping:
                return False
            self._main_mark = self._clock()  # a legitimate wait: keep the systemd pings going
            self._stopping.wait(0.2)
        held.advisory_locked = True
        return True

    def _report_progress(self, held: HeldJob, data: dict[str, Any]) -> None:
        text = oc.encode_json(data)  # refuses what jsonb cannot store, in the handler
        with self._held_lock:
            held.progress = text
            held.progress_dirty = True

    def _take_progress(self, held: HeldJob) -> str | None:
        with self._held_lock:
            if not held.progress_dirty:
                return None
            held.progress_dirty = False
            return held.progress

    # -- what the heartbeat thread calls -------------------------------------------

    def job_running(self) -> bool:
        """True while a handler executes."""
        return self._current is not None

    def progress_pending(self) -> bool:
        """True when some held job has progress not yet written."""
        with self._held_lock:
            return any(h.progress_dirty for h in self._held.values())

    def poll_notifications(self) -> None:
        """Read notifications already on the socket (a cancel NOTIFY), never waiting."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            conn = self._conn
            if conn is None or conn.closed:
                return
            for notify in conn.notifies(timeout=0):
                self._on_notify(notify)
        except psycopg.Error as exc:
            log.debug("notification poll failed: %s", exc)
        finally:
            self._lock.release()

    def beat(self) -> None:
        """Heartbeat: worker row, leases and progress of held jobs, cancel flags."""
        with self._held_lock:
            held = []
            for h in self._held.values():
                progress = h.progress if h.progress_dirty else None
                h.progress_dirty = False
                held.append((h.job.id, h.job.attempt, progress))
        current = self._current
        try:
            rss = self._process.memory_info().rss
            cpu: float | None = self._process.cpu_percent()
        except psutil.Error:
            rss, cpu = None, None
        # Host telemetry (load, nvidia-smi) at most once per heartbeat period: a
        # beat that only writes progress (every 0.5 s at most) reuses the stored one.
        now = self._clock()
        telemetry: str | None = None
        if self._telemetry_at is None or now - self._telemetry_at >= self.settings.heartbeat_s:
            self._telemetry_at = now
            telemetry = json.dumps(host_telemetry(self._gpu))

        def run(conn: psycopg.Connection[Any]) -> store.HeartbeatResult:
            result = store.heartbeat(
                conn,
                self.schema,
                worker_id=self.worker_id,
                state=self._state(current is not None),
                current_job_id=current.job.id if current else None,
                held=held,
                lease_ttl_s=self.settings.lease_ttl_s,
                rss_bytes=rss,
                cpu_percent=cpu,
                telemetry=telemetry,
                warm_key=self._warm_key,
            )
            if not result.registered:
                store.register(
                    conn,
                    self.schema,
                    worker_id=self.worker_id,
                    queue=self.settings.queue,
                    host=self.host,
                    pid=os.getpid(),
                    state=self._state(current is not None),
                )
            return result

        result = self._db(run, attempts=1)
        attempts = {job_id: attempt for job_id, attempt, _ in held}
        newly_lost: list[HeldJob] = []
        with self._held_lock:
            for job_id in result.cancel_ids:
                if job_id in self._held:
                    self._held[job_id].canceled = True
            for job_id in result.lost_ids:
                lost = self._held.get(job_id)
                # The same job may have been finished and claimed again (a new
                # attempt) while this beat ran: only the attempt it renewed is lost.
                if lost is not None and not lost.lost and lost.job.attempt == attempts[job_id]:
                    newly_lost.append(lost)
        for job_id in result.cancel_ids:
            self._watchdog.note_cancel(job_id)
        for lost in newly_lost:
            self._mark_lost(
                lost,
                "the job is no longer this worker's running attempt "
                "(lease expired and reaped, recovered, or re-claimed)",
            )

    def _state(self, busy: bool) -> str:
        """The state shown in ``queue-ctl workers``: stopping, busy, parked or idle."""
        if self.stopping:
            return "stopping"
        if busy:
            return "busy"
        return "parked" if self._parked else "idle"

    def systemd_tick(self) -> None:
        """``STATUS=`` on change and ``WATCHDOG=1`` while healthy; the heartbeat calls it every tick.

        Healthy means the heartbeat thread (the caller) runs, and the main loop
        showed a sign of life lately, or, while a handler runs, the job
        watchdog thread did (a long job is its business). A hang that freezes
        every thread (a C call holding the GIL) stops the pings, and systemd
        kills and restarts the process after ``WatchdogSec``.
        """
        if not self._systemd.enabled:
            return
        try:
            status = self._status_text()
            if status != self._status_sent:
                self._status_sent = status
                self._systemd.status(status)
            every = self._ping_every_s
            now = self._clock()
            if every is not None and now - self._last_ping >= every and self._healthy(now):
                self._last_ping = now
                self._systemd.watchdog()
        except Exception as exc:  # never let systemd chatter break the heartbeat
            log.debug("systemd notification failed: %s", exc)

    def _status_text(self) -> str:
        current = self._current
        if self._reconnecting:
            return f"reconnecting to the database (queue {self.settings.queue})"
        if self.stopping:
            return "stopping" + (f", waiting for job {current.job.id}" if current else "")
        if current is not None:
            return (
                f"running job {current.job.id} ({current.job.task}) on queue {self.settings.queue}"
            )
        if self._parked:
            return f"parked ({self._parked}) on queue {self.settings.queue}"
        return f"idle on queue {self.settings.queue}, {self.jobs_done} jobs done"

    def _healthy(self, now: float) -> bool:
        limit = self._alive_within_s
        if not self._watchdog.alive or now - self._watchdog.last_tick > limit:
            return False
        return self._current is not None or now - self._main_mark <= limit

    # -- what the watchdog thread calls ----------------------------------------------

    def _record_trip(self, armed: ArmedJob, trip: Trip) -> None:
        """Write a trip's outcome with a short-lived connection of its own, then tidy up.

        The main thread is inside the handler (the watchdog holds the arming
        lock, so it cannot leave), so the pending outcomes of jobs run earlier
        and the prefetched jobs that never started are sent in the same
        statement: nothing this worker holds waits for a lease. A zombie's
        outcome is never written. The worker connection is not touched: it may
        be the thing that is stuck.
        """
        with self._held_lock:
            held = self._held.get(armed.job_id)
            unstarted = [h.job for h in self._held.values() if not h.started]
        outcomes = list(self._pending) + [oc.released(job) for job in unstarted]
        mine = None
        if held is not None and held.job.attempt == armed.attempt and trip.kind != "zombie":
            mine = self._trip_outcome(held, armed, trip)
            outcomes.append(mine)
        conn = connect(
            self.settings.dsn,
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
                    queue=self.settings.queue,
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
            self._systemd.stopping()
            log_event(
                log, logging.INFO, "worker.stopped", worker_id=self.worker_id, jobs=self.jobs_done
            )

    def _trip_outcome(self, held: HeldJob, armed: ArmedJob, trip: Trip) -> Outcome:
        job = held.job
        duration_ms = int((self._watchdog.clock() - armed.started) * 1000)
        progress = held.progress if held.progress_dirty else None
        if trip.kind == "give_back":
            return Outcome(
                job.id,
                job.attempt,
                "queued",
                "given_back",
                refund=1,
                duration_ms=duration_ms,
                progress=progress,
                message=trip.message,
            )
        if trip.kind == "cancel":
            return Outcome(
                job.id,
                job.attempt,
                "canceled",
                "canceled",
                error=trip.message,
                duration_ms=duration_ms,
                progress=progress,
                message=trip.message,
            )
        definition = self.tasks.get(job.task)
        return oc.from_exception(
            job,
            WatchdogTripped(trip.message),
            duration_ms,
            retry=definition.retry if definition is not None else None,
            progress=progress,
            error_text=trip.message,
        )


class WatchdogTripped(Exception):
    """The job's wall-clock budget or stall timeout ran out (the message says which)."""


class _StopRequested(Exception):
    """Internal: a wait was cut short by stop()."""


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
