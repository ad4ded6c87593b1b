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
"""

from __future__ import annotations

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
from queue_engine.systemd import SystemdNotifier
from queue_engine.tasks import TaskRegistry
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store
from queue_engine.worker.executor import Executor
from queue_engine.worker.heartbeat import Heartbeat
from queue_engine.worker.outcomes import Outcome
from queue_engine.worker.settings import WorkerSettings

log = logging.getLogger("queue_engine.worker")

T = TypeVar("T")

#: Reconnect backoff: first delay, cap, and jitter fraction.
RECONNECT_BASE_S = 0.2
RECONNECT_MAX_S = 15.0
RECONNECT_JITTER = 0.3
#: Idle waits are cut in slices this long, so a stop request is seen quickly.
WAIT_SLICE_S = 0.25
#: Attempts to write the last outcomes at shutdown when the database is down.
SHUTDOWN_DB_ATTEMPTS = 5
#: How often a claim that lost a lock-key race is retried in a row.
CLAIM_RACE_RETRIES = 5
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
    ) -> None:
        self.settings = settings
        self.tasks = tasks
        self.worker_id = worker_id or make_worker_id()
        self.schema = settings.schema
        self.jobs_channel = queries.jobs_channel(self.schema)
        self.cancel_channel = queries.cancel_channel(self.schema)
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
        self._systemd = SystemdNotifier()
        self.jobs_done = 0
        self._registered = False

    # -- lifecycle ---------------------------------------------------------

    def stop(self) -> None:
        """Ask the worker to stop: no new claims; the current job finishes. Safe to call twice."""
        if not self._stopping.is_set():
            log_event(log, logging.INFO, "worker.stopping", worker_id=self.worker_id)
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
        self._heartbeat.stop()
        self._executor.close()
        if not self._registered:  # stopped (or failed) before it ever worked
            with self._lock:
                self._drop_conn()
            return
        with self._held_lock:
            unstarted = [h.job for h in self._held.values() if not h.started]
        self._ready.clear()
        give_back = [oc.released(job) for job in unstarted]
        if self._pending or give_back:
            try:
                self._flush(extra=give_back, claim_limit=0, attempts=SHUTDOWN_DB_ATTEMPTS)
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
        self._systemd.stopping()
        log_event(
            log, logging.INFO, "worker.stopped", worker_id=self.worker_id, jobs=self.jobs_done
        )

    # -- the connection ----------------------------------------------------

    def _open_conn(self) -> psycopg.Connection[Any]:
        conn = connect(self.settings.dsn, application_name="queue-claim-worker")
        try:
            conn.execute(
                sql.SQL("SET synchronous_commit = {}").format(
                    sql.Literal(self.settings.synchronous_commit)
                )
            )
            # The worker runs the same few statements thousands of times with
            # parameters that do not change their best plan (one queue, a handful
            # of ids): a generic plan saves planning the big finish-and-claim
            # statement on every job, which Postgres' "auto" mode kept doing.
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.jobs_channel)))
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.cancel_channel)))
            store.register(
                conn,
                self.schema,
                worker_id=self.worker_id,
                queue=self.settings.queue,
                host=socket.gethostname(),
                pid=os.getpid(),
                state="idle",
            )
        except BaseException:
            conn.close()
            raise
        # Jobs may have been enqueued while we were not listening: look once.
        self._wake.set()
        return conn

    def _drop_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:  # a broken connection may fail to close
                log.debug("closing the broken connection failed: %s", exc)

    def _db(self, fn: Callable[[psycopg.Connection[Any]], T], *, attempts: int | None = None) -> T:
        """Run ``fn`` on the worker connection, reconnecting with backoff on connection errors.

        ``attempts`` bounds the tries (None: until it works or the worker stops).
        """
        failures = 0
        while True:
            with self._lock:
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = self._open_conn()
                        if failures:
                            log_event(
                                log, logging.INFO, "worker.reconnected", worker_id=self.worker_id
                            )
                    return fn(self._conn)
                except (psycopg.OperationalError, DatabaseUnavailable) as exc:
                    self._drop_conn()
                    error = first_line(exc)
            failures += 1
            if attempts is not None and failures >= attempts:
                raise DatabaseUnavailable(f"lost the database: {error}")
            delay = backoff_s(failures - 1)
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
            if not self._ready:
                self._wake.clear()
                claimed = self._flush(claim_limit=prefetch)
                if not claimed:
                    self._wait_for_work()
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

    def _wait_for_work(self) -> None:
        """Block until a NOTIFY for our queue, the poll interval, or stop."""
        deadline = self._clock() + self.settings.poll_s
        while not self.stopping and not self._wake.is_set():
            remaining = deadline - self._clock()
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
        elif notify.channel == self.cancel_channel:
            try:
                job_id = int(notify.payload)
            except ValueError:
                return
            with self._held_lock:
                held = self._held.get(job_id)
                if held is not None:
                    held.canceled = True

    # -- flushing outcomes and claiming ----------------------------------------

    def _flush(
        self, *, claim_limit: int, extra: list[Outcome] | None = None, attempts: int | None = None
    ) -> int:
        """Send pending outcomes (plus ``extra``) and claim up to ``claim_limit``; return claimed."""
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
            lambda conn: self._finish_and_claim(conn, outcomes, claim_limit), attempts=attempts
        )
        self._pending = []
        if claimed < claim_limit and lock_keyed and not self.stopping:
            # The finished jobs' lock keys looked busy to that statement's snapshot:
            # look again now that they are free (a round trip only keyed jobs pay).
            claimed += self._db(
                lambda conn: self._finish_and_claim(conn, [], claim_limit - claimed)
            )
        return claimed

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
            break
        with self._held_lock:
            done = [(o, self._held.pop(o.job_id, None)) for o in outcomes]
            for job in claimed:
                self._held[job.id] = HeldJob(job)
        for _outcome, held in done:
            if held is not None and held.advisory_locked and held.job.lock_key is not None:
                store.unlock_key(conn, held.job.lock_key)
        self._ready.extend(claimed)
        for outcome, held in done:
            self._log_outcome(outcome, held, finished.get(outcome.job_id))
        return len(claimed)

    def _finish_one_by_one(
        self, conn: psycopg.Connection[Any], outcomes: list[Outcome]
    ) -> dict[int, str]:
        """Finish each outcome alone; one the database refuses becomes a failure that says why."""
        common: dict[str, Any] = {"worker_id": self.worker_id, "queue": self.settings.queue}
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
        ctx = JobContext(
            job,
            worker_id=self.worker_id,
            dsn=self.settings.dsn,
            schema=self.schema,
            report_progress=lambda data: self._report_progress(held, data),
            is_canceled=lambda: held.canceled or held.lost,
        )
        self._current = held
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
            self._current = None
            ctx.close()
        self._add_outcome(outcome)

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
        while not self._db(lambda conn: store.try_lock_key(conn, key)):
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

        def run(conn: psycopg.Connection[Any]) -> store.HeartbeatResult:
            result = store.heartbeat(
                conn,
                self.schema,
                worker_id=self.worker_id,
                state="stopping" if self.stopping else ("busy" if current else "idle"),
                current_job_id=current.job.id if current else None,
                held=held,
                lease_ttl_s=self.settings.lease_ttl_s,
                rss_bytes=rss,
                cpu_percent=cpu,
            )
            if not result.registered:
                store.register(
                    conn,
                    self.schema,
                    worker_id=self.worker_id,
                    queue=self.settings.queue,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    state="busy" if current else "idle",
                )
            return result

        result = self._db(run, attempts=1)
        self._systemd.watchdog()
        with self._held_lock:
            for job_id in result.cancel_ids:
                if job_id in self._held:
                    self._held[job_id].canceled = True
            for job_id in result.lost_ids:
                lost = self._held.get(job_id)
                if lost is not None and not lost.lost:
                    lost.lost = True
                    log_event(
                        log,
                        logging.ERROR,
                        "job.lease_lost",
                        job_id=job_id,
                        worker_id=self.worker_id,
                        reason="the job is no longer this worker's running attempt "
                        "(lease expired and reaped, or canceled); it will be stopped "
                        "at its next checkpoint and its finish ignored",
                    )


class _StopRequested(Exception):
    """Internal: a wait was cut short by stop()."""


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
