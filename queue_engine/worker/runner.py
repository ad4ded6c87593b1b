"""Running one job: checks before it starts, the handler under the watchdog, its outcome.

Before the handler runs, a job may turn out not to be runnable: no longer
ours (a zombie, dropped without an outcome), a task this worker does not know
(failed), canceled before it started, a workflow node whose ``skip_if`` holds
(skipped) or whose args' references cannot be resolved (failed), or a lock
key whose advisory lock another session holds (waited for; given back if the
worker stops meanwhile).
Otherwise the handler runs on the main thread with its context (``ctx``),
armed in the job watchdog (budget, stall) at no cost per job; whatever it
returns or raises becomes the job's :class:`~.outcomes.Outcome`, queued for
the next finish-and-claim statement; a success carries the follow-ups the
handler buffered (``ctx.enqueue``), any other outcome drops them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from time import perf_counter

from queue_engine.foundation.logs import log_event, mask_secrets
from queue_engine.producer.context import ClaimedJob, JobContext
from queue_engine.producer.retry import Skip
from queue_engine.producer.tasks import TaskRegistry
from queue_engine.producer.workflows import refs
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store
from queue_engine.worker.connection import WorkerConnection
from queue_engine.worker.executor import Executor
from queue_engine.worker.flush import Flusher
from queue_engine.worker.gate import Gate
from queue_engine.worker.handler_connections import HandlerConnections
from queue_engine.worker.jobs import HeldJob, HeldJobs
from queue_engine.worker.settings import WorkerSettings
from queue_engine.worker.watchdog import JobWatchdog, job_budget_s, stall_timeout_s

log = logging.getLogger("queue_engine.worker")


class JobRunner:
    """Runs the worker's jobs one at a time on the calling (main) thread."""

    def __init__(
        self,
        settings: WorkerSettings,
        tasks: TaskRegistry,
        *,
        worker_id: str,
        jobs: HeldJobs,
        connection: WorkerConnection,
        flusher: Flusher,
        gate: Gate,
        watchdog: JobWatchdog,
        stopping: threading.Event,
        mark_alive: Callable[[], None],
    ) -> None:
        """``mark_alive`` is called while waiting for a busy lock key (a legitimate wait)."""
        self.settings = settings
        self.tasks = tasks
        self.worker_id = worker_id
        self.schema = settings.schema
        self.jobs = jobs
        self.connection = connection
        self.flusher = flusher
        self.gate = gate
        self.watchdog = watchdog
        self.executor = Executor()
        self.handler_connections = HandlerConnections(settings.dsn)
        self._stopping = stopping
        self._mark_alive = mark_alive

    def close(self) -> None:
        """Close the coroutine handlers' event loop and the handler connections' pool."""
        self.executor.close()
        self.handler_connections.close()

    def run(self, job: ClaimedJob) -> None:
        """Run ``job`` (or decide it must not run) and queue its outcome."""
        held, canceled = self.jobs.start(job)
        if held.lost:  # prefetched, then found no longer ours: never run it
            self.flusher.forget_zombie(held, ran=False)
            return
        definition = self.tasks.get(job.task)
        if definition is None:
            self.jobs.add_outcome(oc.unknown_task(job, self.tasks.names()))
            return
        if canceled:
            self.jobs.add_outcome(oc.canceled_before_start(job))
            return
        args = job.args
        if job.workflow_id is not None and refs.has_references(args):
            # A node's skip_if first: a skipped node's args need not resolve.
            parents = job.parents or {}
            try:
                reason = refs.skip_reason(args, parents)
                if reason is not None:
                    self.jobs.add_outcome(oc.skipped(job, Skip(reason), 0))
                    return
                args = refs.resolve(args, parents)
            except refs.BadReference as exc:
                self.jobs.add_outcome(oc.bad_reference(job, str(exc)))
                return
        if job.lock_key is not None and not self._take_lock_key(held):
            self.jobs.add_outcome(oc.released(job))
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
        watchdog = self.watchdog
        ctx = JobContext(
            job,
            worker_id=self.worker_id,
            dsn=self.settings.dsn,
            schema=self.schema,
            report_progress=lambda data: self.jobs.report_progress(held, data),
            is_canceled=lambda: held.canceled or held.lost,
            beat=watchdog.beat,
            connections=self.handler_connections,
        )
        self.jobs.current = held
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
        started = perf_counter()
        try:
            result = self.executor.run(definition, args, ctx)
        except Exception as exc:
            outcome = oc.from_exception(
                job,
                exc,
                _elapsed_ms(started),
                retry=definition.retry,
                progress=self.jobs.take_progress(held),
            )
        except SystemExit as exc:
            # sys.exit() in a handler is a handler bug, not the worker's wish to
            # stop (the engine itself exits with os._exit): fail this attempt
            # like any exception, with the code in the error, and keep working.
            outcome = oc.from_exception(
                job,
                oc.HandlerExited(exc),
                _elapsed_ms(started),
                retry=definition.retry,
                progress=self.jobs.take_progress(held),
                error_text=oc.format_traceback(exc),
            )
        else:
            outcome = oc.succeeded(
                job,
                result,
                int((perf_counter() - started) * 1000),
                self.jobs.take_progress(held),
                ctx.followups.encoded(),
            )
        finally:
            watchdog.disarm()
            self.jobs.current = None
            ctx.close()
        self.gate.warmed(job.affinity_key)
        if held.lost:
            self.flusher.forget_zombie(held, ran=True)
            return
        self.jobs.add_outcome(outcome)

    def _take_lock_key(self, held: HeldJob) -> bool:
        """Take the lock key's advisory lock, waiting while another session (a zombie) holds it.

        Returns False when the worker is asked to stop while waiting.
        """
        key = held.job.lock_key
        assert key is not None
        warned = False
        while not self.connection.run(lambda conn: store.try_lock_key(conn, self.schema, key)):
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
            if self._stopping.is_set():
                return False
            self._mark_alive()  # a legitimate wait: keep the systemd pings going
            self._stopping.wait(0.2)
        held.advisory_locked = True
        return True


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
