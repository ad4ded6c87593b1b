"""Run a queue's due jobs in the test's process: ``drain``.

A real :class:`~queue_engine.worker.Worker` runs in a thread of the test
process, so jobs go through the engine's own claim and finish statements,
retry policies, snoozes and outcome rules; only the process is the test's. Its
``exit`` is replaced, so a watchdog trip fails the drain instead of ending the
test run, and the real hard deadline (a process-wide timer) is never armed.

The drain stops when the queue has nothing due and nothing running (read in
one snapshot, see ``sql/count_drain_jobs.sql``), after ``limit`` jobs, or at
the first handler error when ``raise_errors``. With ``run_delayed`` the
queue's delayed jobs (retries, snoozes, ``run_at``) are made due between
rounds, so a test sees a failing-then-succeeding handler through to the end
without waiting for its backoff. With ``at`` (a datetime or a
:class:`~queue_engine.testing.clock.TestClock`) only those due by that instant
are: time has moved to ``at`` for the queue, and a job delayed past it waits.

Handlers are wrapped (in a private copy of the registry) only to observe:
which job and attempt started, and the exception a handler raised, so that
``raise_errors`` can re-raise the very exception object in the test.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import connect
from queue_engine.producer.async_client import AsyncClient
from queue_engine.producer.jobs import Job
from queue_engine.producer.retry import Snooze
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry, registry
from queue_engine.producer.validation import DEFAULT_QUEUE
from queue_engine.testing.assertions import Target, connection_of, schema_of
from queue_engine.testing.clock import Instant, instant_of
from queue_engine.worker import Worker, WorkerSettings

__all__ = ["DrainError", "DrainOutcome", "drain"]

Connection = psycopg.Connection[Any]

#: How often the drain looks at the queue while the worker runs.
CHECK_S = 0.02
#: The worker's poll: short, so jobs made due by ``run_delayed`` (no NOTIFY) are found fast.
WORKER_POLL_S = 0.05


class DrainError(AssertionError):
    """The drain could not finish: a watchdog trip, the worker failing, or the time limit."""


@dataclass(frozen=True, slots=True)
class DrainOutcome:
    """One run of one job: its attempt, and how it stood after that run.

    ``status`` is the job's status after the run: ``queued`` when it was put
    back (a retry or a snooze), else its final status; ``result`` is the
    job's after its last run. ``error`` is what the run raised, as
    ``"Type: message"``, else (a run that raised nothing, such as one ended by
    the watchdog) the error the engine stored for the job's last run.
    """

    job_id: int
    task: str
    attempt: int
    status: str
    result: Any
    error: str | None


@dataclass
class _Run:
    job_id: int
    task: str
    attempt: int
    error: BaseException | None = None


class _Observer:
    """What the wrapped handlers saw; shared by the worker thread and the test's thread."""

    def __init__(self, limit: int | None, raise_errors: bool) -> None:
        self.limit = limit
        self.raise_errors = raise_errors
        self.runs: list[_Run] = []
        self.first_error: BaseException | None = None
        self.done = threading.Event()  # the drain should stop claiming
        #: Called (in the worker's thread, from inside the handler) when the drain
        #: is done: the worker then claims nothing after the current job. Stopped
        #: later, from the test's thread, it could already have claimed the next.
        self.stop_worker: Callable[[], None] = lambda: None
        self._lock = threading.Lock()

    def _finish(self) -> None:
        self.stop_worker()
        self.done.set()

    def started(self, job_id: int, task: str, attempt: int) -> _Run:
        run = _Run(job_id, task, attempt)
        with self._lock:
            self.runs.append(run)
            if self.limit is not None and len(self.runs) >= self.limit:
                self._finish()
        return run

    def failed(self, run: _Run, exc: BaseException) -> None:
        run.error = exc
        if isinstance(exc, Snooze):  # a snooze steers the job; it is not an error
            return
        with self._lock:
            if self.first_error is None:
                self.first_error = exc
        if self.raise_errors:
            self._finish()

    def wrap(self, definition: TaskDefinition) -> TaskDefinition:
        """The same task, its handler observed; always called with ``(args, ctx)``."""
        handler, wants_context = definition.handler, definition.wants_context

        def observed(args: dict[str, Any], ctx: Any) -> Any:
            run = self.started(ctx.job.id, ctx.job.task, ctx.job.attempt)
            try:
                returned = handler(args, ctx) if wants_context else handler(args)
            except Exception as exc:
                self.failed(run, exc)
                raise
            if inspect.isgenerator(returned):
                return self._generator(run, returned)
            if inspect.isasyncgen(returned):
                return self._async_generator(run, returned)
            if inspect.iscoroutine(returned):
                return self._coroutine(run, returned)
            return returned

        return dataclasses.replace(definition, handler=observed, wants_context=True)

    def _generator(self, run: _Run, gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
        try:
            return (yield from gen)
        except Exception as exc:
            self.failed(run, exc)
            raise

    async def _async_generator(
        self, run: _Run, agen: AsyncGenerator[Any, Any]
    ) -> AsyncGenerator[Any, Any]:
        try:
            async for value in agen:
                yield value
        except Exception as exc:
            self.failed(run, exc)
            raise
        finally:
            await agen.aclose()

    async def _coroutine(self, run: _Run, coro: Coroutine[Any, Any, Any]) -> Any:
        try:
            return await coro
        except Exception as exc:
            self.failed(run, exc)
            raise


def drain(
    target: Target | AsyncClient,
    *,
    queue: str = DEFAULT_QUEUE,
    tasks: TaskRegistry | None = None,
    limit: int | None = None,
    run_delayed: bool = False,
    at: Instant | None = None,
    raise_errors: bool = False,
    schema: str | None = None,
    timeout_s: float = 60.0,
) -> list[DrainOutcome]:
    """Run ``queue``'s due jobs in this process with a real worker; return one outcome per run.

    ``tasks`` is the registry whose handlers run (default: the ``@task``
    registry). ``limit`` stops after that many jobs have started;
    ``run_delayed`` makes retries, snoozes and future ``run_at`` due at once;
    ``at`` (a datetime or a ``TestClock``, read each round) makes due only
    the delayed jobs whose time is at or before it;
    ``raise_errors`` stops at the first handler exception and re-raises it
    here (its job is finished first, as the engine would: retried or failed).
    ``timeout_s`` bounds the whole drain (a handler that never ends, a job
    snoozed forever with ``run_delayed``): past it, :class:`DrainError`.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit!r}")
    if run_delayed and at is not None:
        raise ValueError("give run_delayed=True (every delayed job) or at=... (those due by then)")
    observer = _Observer(limit, raise_errors)
    observed = TaskRegistry()
    for definition in tasks if tasks is not None else registry:
        observed.register(observer.wrap(definition))
    dsn, schema = _dsn_and_schema(target, schema)
    worker_errors: list[BaseException] = []

    def no_exit(code: int) -> None:
        # A watchdog trip must not end the test process: the drain fails instead.
        worker_errors.append(DrainError(f"the job watchdog would have exited with code {code}"))
        observer.done.set()

    settings = WorkerSettings(
        queue=queue,
        app="queue_engine.testing",
        dsn=dsn,
        schema=schema,
        poll_s=WORKER_POLL_S,
        heartbeat_s=0.5,
        lease_ttl_s=30,
        connect_retry_s=5,
        prefetch=1,  # nothing claimed ahead: a stop leaves the next jobs untouched
    )
    worker = Worker(settings, observed, exit=no_exit)
    observer.stop_worker = worker.stop

    def run_worker() -> None:
        try:
            worker.run()
        except BaseException as exc:
            worker_errors.append(exc)
            observer.done.set()

    thread = threading.Thread(target=run_worker, name="queue-engine-drain", daemon=True)
    # The drain watches the queue on a session of its own, like the worker's: a
    # client bound to the test's open transaction would see jobs the worker
    # cannot (uncommitted), and wait for them in vain.
    watch = connect(dsn)
    try:
        thread.start()
        deadline = time.monotonic() + timeout_s
        try:
            while not observer.done.is_set() and thread.is_alive():
                if _queue_settled(watch, schema, queue, run_delayed, at):
                    break
                if time.monotonic() > deadline:
                    worker_errors.append(
                        DrainError(f"queue {queue!r} was not drained within {timeout_s:g}s")
                    )
                    break
                observer.done.wait(CHECK_S)
        finally:
            worker.stop()
            thread.join(timeout_s)
        if thread.is_alive():
            raise DrainError("the drain's worker did not stop")
        if worker_errors:
            raise worker_errors[0]
        if raise_errors and observer.first_error is not None:
            raise observer.first_error
        return _outcomes(watch, schema, observer.runs)
    finally:
        watch.close()


def _dsn_and_schema(target: Target | AsyncClient, schema: str | None) -> tuple[str, str]:
    """Where the drain's worker connects: the target's database, with its password."""
    if isinstance(target, AsyncClient):
        # Its connections live in an event loop; the worker needs only where they go.
        bound = target._conn
        if bound is None:
            return target._dsn, target.schema
        info = bound.info
        return _with_password(info.dsn, info.password), target.schema
    with connection_of(target) as conn:
        dsn = _with_password(conn.info.dsn, conn.info.password)
    return dsn, schema_of(target, schema)


def _with_password(dsn: str, password: str | None) -> str:
    # conn.info.dsn leaves the password out.
    return make_conninfo(dsn, password=password) if password else dsn


def _queue_settled(
    conn: Connection, schema: str, queue: str, run_delayed: bool, at: Instant | None
) -> bool:
    """True when nothing is due or running; delayed jobs (all, or due by ``at``) are made due first."""
    due, running, delayed = conn.execute(
        queries.query("count_drain_jobs", schema), {"queue": queue}
    ).fetchone() or (0, 0, 0)
    if due or running:
        return False
    if delayed and (run_delayed or at is not None):
        until = None if at is None else instant_of(at)
        made_due = conn.execute(
            queries.query("advance_delayed_jobs", schema), {"queue": queue, "until": until}
        ).fetchall()
        return not made_due
    return True


def _outcomes(conn: Connection, schema: str, runs: list[_Run]) -> list[DrainOutcome]:
    """One outcome per run: put back for all but a job's last run, the job's row after its last."""
    jobs: dict[int, Job] = {}
    with conn.cursor(row_factory=dict_row) as cur:
        for job_id in {run.job_id for run in runs}:
            cur.execute(queries.query("get_job", schema), {"id": job_id})
            row = cur.fetchone()
            if row is not None:
                jobs[job_id] = Job.from_row(row)
    last = {run.job_id: index for index, run in enumerate(runs)}
    outcomes = []
    for index, run in enumerate(runs):
        error = None if run.error is None else f"{type(run.error).__name__}: {run.error}"
        job = jobs.get(run.job_id)
        if last[run.job_id] == index and job is not None:
            outcomes.append(
                DrainOutcome(
                    run.job_id,
                    run.task,
                    run.attempt,
                    str(job.status),
                    job.result,
                    error or job.error,
                )
            )
        else:
            outcomes.append(DrainOutcome(run.job_id, run.task, run.attempt, "queued", None, error))
    return outcomes
