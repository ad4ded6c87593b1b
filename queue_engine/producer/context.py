"""What a handler sees of its job and of the worker running it.

A handler declared as ``(args, ctx)`` gets a :class:`JobContext`: the claimed
job, a way to report progress and to check for cancellation, and a database
connection of its own. The context never touches the worker's connection: the
worker's session may run with ``synchronous_commit = off`` and is shared with
the heartbeat, while a handler's writes must be as durable as any other
application write, so ``ctx.connect()`` lends a separate, ordinary connection
(from the worker's pool of handler connections, see
:mod:`queue_engine.worker.handler_connections`; lent on first use and taken
back when the job ends).

``ctx.enqueue`` is the one write that *is* atomic with the job's success: it
buffers a follow-up job that the worker's finish statement inserts together
with the success, or not at all (:mod:`queue_engine.producer.followups`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, Unpack

import psycopg

from queue_engine.foundation.db import connect
from queue_engine.producer.followups import FollowUpBuffer
from queue_engine.producer.validation import EnqueueOptions

if TYPE_CHECKING:
    from queue_engine.producer.client import Client


class JobCanceled(Exception):
    """The job's cancel was requested and the handler was stopped at a checkpoint."""

    def __init__(self) -> None:
        super().__init__("canceled at a checkpoint")


class ConnectionLender(Protocol):
    """Where a context borrows the handler's connection (the worker's small pool)."""

    def acquire(self) -> psycopg.Connection[Any]:
        """A connection for this job."""
        ...

    def release(self, conn: psycopg.Connection[Any]) -> None:
        """Take the connection back after the job."""
        ...


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """The columns of a job that a claim returns: what the worker and handler need."""

    id: int
    queue: str
    task: str
    args: dict[str, Any]
    attempt: int
    max_attempts: int
    priority: int
    lock_key: str | None
    lease_ttl_s: int | None
    timeout_s: int | None
    created_at: datetime
    cancel_requested: bool = False
    affinity_key: str | None = None
    #: For a workflow node: the workflow, the node's name, and its parents as
    #: ``{node: {"status": ..., "result": ...}}`` (read by the claim itself).
    workflow_id: int | None = None
    node: str | None = None
    parents: dict[str, Any] | None = None
    #: Claimed by its last parent's finish (a hand-over), not from the queue.
    handed_over: bool = False


@dataclass(frozen=True, slots=True)
class ParentOutcome:
    """How one parent of a workflow node ended, and what it returned."""

    status: str
    result: Any


class JobContext:
    """A handler's view of its running job (``ctx``).

    Progress reported with :meth:`progress` is buffered and written with the
    next heartbeat (at most every half second or so), so reporting progress in
    a tight loop costs no round trip per call. :attr:`cancel_requested` turns
    true when a cancel of this job is seen (by the heartbeat, or by the cancel
    NOTIFY); generator handlers are stopped at their next ``yield`` without
    having to look at it, and :meth:`beat` raises :class:`JobCanceled` for
    other handlers. The same stop applies when the worker finds the job is no
    longer its own (the lease lapsed and the job was recovered): the execution
    is a zombie and its outcome is never written.

    Every yield, :meth:`beat` and :meth:`progress` is also a *progress beat*
    for the stall watchdog (tasks with ``stall_timeout_s``): an in-process
    timestamp, no round trip.
    """

    def __init__(
        self,
        job: ClaimedJob,
        *,
        worker_id: str,
        dsn: str,
        schema: str,
        report_progress: Callable[[dict[str, Any]], None],
        is_canceled: Callable[[], bool],
        beat: Callable[[], None] | None = None,
        connections: ConnectionLender | None = None,
    ) -> None:
        """``connections`` lends :meth:`connect`'s connection; without it, one is opened."""
        self.job = job
        self.worker_id = worker_id
        self.schema = schema
        self._dsn = dsn
        self._report_progress = report_progress
        self._is_canceled = is_canceled
        self._beat = beat
        self._connections = connections
        self._conn: psycopg.Connection[Any] | None = None
        #: The follow-ups buffered by :meth:`enqueue` and :meth:`enqueue_many`.
        self.followups = FollowUpBuffer(job.id, job.attempt)

    @property
    def workflow_id(self) -> int | None:
        """The workflow this job is a node of (None for a plain job)."""
        return self.job.workflow_id

    @property
    def node(self) -> str | None:
        """This node's name in its workflow (None for a plain job)."""
        return self.job.node

    @property
    def parents(self) -> dict[str, ParentOutcome]:
        """The parents of this workflow node by name: how each ended and its result.

        Empty for a plain job or a node without parents. A node after a
        ``finished`` edge sees failed parents here too (status ``failed``,
        ``canceled``, ``lost`` or ``skipped``).
        """
        return {
            name: ParentOutcome(str(p.get("status")), p.get("result"))
            for name, p in (self.job.parents or {}).items()
        }

    @property
    def parent_results(self) -> dict[str, Any]:
        """The parents' results by node name (None for a parent that returned nothing)."""
        return {name: p.result for name, p in self.parents.items()}

    @property
    def cancel_requested(self) -> bool:
        """True once a cancel of this job was requested; stop soon and return or raise."""
        return self._is_canceled()

    def progress(self, data: dict[str, Any]) -> None:
        """Record ``data`` (a JSON-able dict) as the job's progress; it replaces the last one."""
        if not isinstance(data, dict):
            raise TypeError(f"progress must be a dict, got {type(data).__name__}")
        self._report_progress(data)
        if self._beat is not None:
            self._beat()

    def beat(self) -> None:
        """A checkpoint without progress: tell the worker the handler is alive.

        Raises :class:`JobCanceled` when the job must stop (a cancel was
        requested, or the job is no longer this worker's): let it propagate.
        """
        if self._beat is not None:
            self._beat()
        if self._is_canceled():
            raise JobCanceled()

    def checkpoint(self, value: object = None) -> bool:
        """A ``yield`` of a generator handler: record dict progress; True when it must stop."""
        if isinstance(value, dict):
            self.progress(value)
        elif self._beat is not None:
            self._beat()
        return self.cancel_requested

    def connect(self) -> psycopg.Connection[Any]:
        """The handler's own autocommit connection for this job, the same on every call.

        Lent by the worker (one pooled connection per worker process) on first
        use and taken back when the job ends: do not keep it past the job.
        ``with ctx.connect() as conn:`` commits (or rolls back) at the end of
        the block but leaves the connection to the worker. Use ``with
        conn.transaction():`` to group writes. The job's outcome is recorded on
        the worker's connection, not on this one: a handler's write and its
        job's success are not one transaction (delivery is at-least-once, so
        make handlers idempotent).
        """
        if self._conn is None or self._conn.closed:
            if self._connections is not None:
                if self._conn is not None:  # closed by the handler: the pool replaces it
                    self._connections.release(self._conn)
                self._conn = self._connections.acquire()
            else:
                self._conn = connect(self._dsn, application_name="queue-engine-handler")
        return self._conn

    def enqueue(self, task: str, **options: Unpack[EnqueueOptions]) -> None:
        """Buffer a follow-up job, inserted if and only if this job's success is committed.

        Takes :meth:`Client.enqueue <queue_engine.producer.client.Client.enqueue>`'s
        options and validates them now, so a bad one raises
        :class:`~queue_engine.foundation.errors.ValidationError` here, in the handler.
        Nothing is written until the handler returns: the worker's finish
        statement inserts the follow-ups in the transaction that records the
        success; a failure, retry, snooze or cancel discards them. A job whose
        idempotency or dedupe key is taken is skipped, as ``Client.enqueue``
        would return the existing one. ``producer`` defaults to ``job:<id>``
        of this job. At most :data:`~queue_engine.producer.followups.MAX_FOLLOWUPS` per
        attempt (docs/guides/follow-ups.md).
        """
        self.followups.add(task, options)

    def enqueue_many(self, jobs: Iterable[dict[str, Any]]) -> None:
        """Buffer many follow-ups (dicts of :meth:`enqueue`'s options, ``task`` included).

        Every item is validated first: a bad one raises and none is buffered.
        """
        self.followups.add_many(jobs)

    def client(self) -> Client:
        """A :class:`~queue_engine.producer.client.Client` on :meth:`connect`'s connection.

        Its enqueues are committed at once, whatever becomes of this job: a
        crash before the job's finish commits runs the job again and enqueues
        them again. Use :meth:`enqueue` to hand work on atomically.
        """
        from queue_engine.producer.client import Client

        return Client(conn=self.connect(), schema=self.schema)

    def close(self) -> None:
        """Give back (or close) the handler's connection, if one was used (the worker calls this)."""
        conn, self._conn = self._conn, None
        if conn is not None and self._connections is not None:
            self._connections.release(conn)
        elif conn is not None and not conn.closed:
            # A broken connection may fail to close; there is nothing more to do.
            with contextlib.suppress(psycopg.Error):
                conn.close()
