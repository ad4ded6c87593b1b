"""The producer API for asyncio code: enqueue, inspect, cancel and retry jobs.

The client either owns a small connection pool (``AsyncClient(dsn)``), in
which case every call is its own committed transaction, or works on a
connection the caller passes (``AsyncClient(conn=...)`` or ``conn=`` per
call), in which case the job exists if and only if the caller's transaction
commits. What each operation sends and how it reads the answer lives in
:mod:`queue_engine.producer.operations` (and :mod:`queue_engine.producer.workflows.operations`);
only the I/O is here.

One source for both clients: ``client.py`` is generated from
``async_client.py`` by ``scripts/async_to_sync.py``, which drops ``await``
and ``async``, swaps each asyncio name for its synchronous twin and keeps
the ``else`` side of each ``if True:  # ASYNC`` block; a unit test fails
when the two drift (docs/contributing.md, "Generated code"). Generated
rather than one core with two thin faces: the core would have to hand each
statement out and take its rows back (a generator driven by each face, as
sans-I/O libraries do), a generator and its round trips on every call of
the single enqueue, whose client-side Python has been cut to the
microsecond (bench/runs/2026-11-27-log.md); generated, each client is plain
straight-line code with nothing between the caller and psycopg. The
direction is psycopg's: dropping ``await`` is mechanical, knowing where to
add it is not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Unpack

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.config import resolve_dsn, resolve_schema
from queue_engine.foundation.db import (
    APPLICATION_NAME,
    AsyncCursorKeepingConnection,
    SchemaErrors,
    async_tuple_cursor,
    connect_async,
)
from queue_engine.foundation.errors import JobNotFound, WorkflowNotFound
from queue_engine.producer import operations as ops
from queue_engine.producer.jobs import Job
from queue_engine.producer.kept_defaults import KeptDefaults
from queue_engine.producer.validation import EnqueueOptions, JobSpec
from queue_engine.producer.workflows import operations as wf_ops
from queue_engine.producer.workflows.model import NodeInfo, WorkflowInfo
from queue_engine.producer.workflows.spec import Workflow

if TYPE_CHECKING:
    from queue_engine.producer.client_pool import KeptAsyncConnectionPool

if True:  # ASYNC
    # The synchronous client imports no pool at module level: a client on the
    # caller's connection (``conn=``, as ``queue-ctl`` uses it) never needs
    # the pool package.
    from queue_engine.producer.client_pool import AsyncPooledSession

AsyncConnection = psycopg.AsyncConnection[Any]


class _GivenAsyncConnection(SchemaErrors):
    """``async with``: a caller's connection, the engine's errors translated."""

    __slots__ = ("_conn",)

    def __init__(self, conn: AsyncConnection, schema: str) -> None:
        super().__init__(schema)
        self._conn = conn

    if True:  # ASYNC

        async def __aenter__(self) -> AsyncConnection:
            return self._conn

        async def __aexit__(
            self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
        ) -> None:
            self.__exit__(exc_type, exc, tb)

    else:

        def __enter__(self) -> AsyncConnection:  # type: ignore[override, unused-ignore]
            return self._conn


class AsyncClient:
    """Enqueue and manage jobs from asyncio code."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str | None = None,
        conn: AsyncConnection | None = None,
        pool_size: int = 4,
        prepared_statements: bool = True,
    ) -> None:
        """Remember where to connect; the pool is opened on first use.

        ``prepared_statements=False`` for a DSN through a transaction pooler
        that cannot carry them (PgBouncer before 1.21, or without
        ``max_prepared_statements``): each call then has its statement parsed
        anew. It applies to the client's own pool; a connection you pass in is
        yours to configure (``prepare_threshold=None``).
        """
        self.schema = resolve_schema(schema)
        self._conn = conn
        self._dsn = resolve_dsn(dsn)
        self._pool_size = pool_size
        self._pool_kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": APPLICATION_NAME,
        }
        if not prepared_statements:
            self._pool_kwargs["prepare_threshold"] = None
        self._pool: KeptAsyncConnectionPool | None = None
        self._enqueue_plain = queries.query("enqueue_plain", self.schema)
        #: The plain insert that fills unset options from the task's defaults.
        self._enqueue_plain_defaults = queries.query("enqueue_plain_defaults", self.schema)
        #: What it filled, reused for a second by the calls with the same task
        #: and queue (``kept_defaults.keep_s = 0``: look up every time).
        self.kept_defaults = KeptDefaults()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the pool, if this client opened one; a passed-in connection is left open."""
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def _open_pool(self) -> KeptAsyncConnectionPool:
        if self._pool is None:
            # Imported here: a client on the caller's connection never needs them.
            from psycopg_pool import AsyncConnectionPool

            from queue_engine.producer.client_pool import KeptAsyncConnectionPool

            probe = await connect_async(self._dsn)  # fail fast, with a clear reason, if unreachable
            await probe.close()
            pool = AsyncConnectionPool(
                self._dsn,
                connection_class=AsyncCursorKeepingConnection,
                min_size=1,
                max_size=self._pool_size,
                kwargs=self._pool_kwargs,
                open=False,
                name="queue-engine-async-client",
            )
            await pool.open()
            self._pool = KeptAsyncConnectionPool(pool)
        return self._pool

    def _connection(
        self, conn: AsyncConnection | None
    ) -> AbstractAsyncContextManager[AsyncConnection]:
        """``async with``: the connection for one call (the caller's, or a pooled one), errors translated.

        The pool's session is taken and given back by the client's
        :class:`~queue_engine.producer.client_pool.KeptAsyncConnectionPool`, not with
        ``pool.connection()``: that context manager also enters the
        connection's own one (a commit on exit, a no-op on these autocommit
        sessions but a pass through psycopg's wait loop) and adds a generator
        of its own (bench/runs/2026-11-27-log.md, "Single enqueue: the client").
        """
        chosen = conn if conn is not None else self._conn
        if chosen is not None:
            return _GivenAsyncConnection(chosen, self.schema)
        if True:  # ASYNC
            # Opening the pool awaits: the session opens it when entered.
            return AsyncPooledSession(self._open_pool, self.schema)
        else:
            return self._open_pool().session(self.schema)

    async def _fetch_one(
        self, conn: AsyncConnection, statement: ops.Statement
    ) -> dict[str, Any] | None:
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement.query, statement.params, prepare=True)
            return await cur.fetchone()

    async def enqueue(
        self, task: str, *, conn: AsyncConnection | None = None, **options: Unpack[EnqueueOptions]
    ) -> Job:
        """Enqueue one job; with an idempotency or dedupe key, may return the existing job.

        ``options`` are the keywords of
        :class:`~queue_engine.producer.validation.EnqueueOptions` (the table of
        docs/guides/enqueueing.md), each left out or None by default.

        ``queue``, ``priority``, ``max_attempts``, ``timeout_s`` and
        ``lease_ttl_s`` left unset take the task's defaults: its declaration
        when the task is registered in this process, else the defaults its
        workers published to the database, else ``"default"``, 100, 5 and the
        worker's own budget and lease (docs/guides/enqueueing.md).

        ``affinity_key`` names the warm state the job wants (say, the model it
        loads): a worker warm for that key prefers the job, but any worker of
        the queue may still run it, so a key never strands a job.
        """
        if ops.is_plain(options):
            queue, args = options.get("queue"), options.get("args")
            kept = self.kept_defaults.spec(task, queue, args)
            spec, params = kept if kept is not None else ops.plain_enqueue(task, queue, args)
            if spec.concurrency_key is not None:
                # A task declared with a concurrency key: the plain inserts do
                # not write it (operations.is_keyed).
                return await self._enqueue_spec(spec, conn=conn)
            async with self._connection(conn) as c:
                cur = async_tuple_cursor(c)
                query = (
                    self._enqueue_plain
                    if spec.defaults_of is None
                    else self._enqueue_plain_defaults
                )
                await cur.execute(query, params, prepare=True)
                inserted = await cur.fetchone()
            assert inserted is not None  # an INSERT ... RETURNING answers its row
            if spec.defaults_of is not None:
                self.kept_defaults.keep(spec, inserted)
            return ops.inserted_job(spec, inserted)
        return await self._enqueue_spec(ops.spec_for(task, options), conn=conn)

    async def _enqueue_spec(self, spec: JobSpec, *, conn: AsyncConnection | None = None) -> Job:
        """Enqueue a request validated already (:func:`~queue_engine.producer.operations.job_spec`).

        :meth:`enqueue` past its plain case, and the HTTP API's create
        route, which validates the request itself (it compares a re-sent
        idempotency key's options with the job's): validated once.
        """
        statement = ops.enqueue_statement(self.schema, spec)
        async with self._connection(conn) as c:
            if not ops.is_keyed(spec):
                # Nothing can conflict, one row comes back, as a tuple whatever
                # row factory a caller's connection carries.
                cur = async_tuple_cursor(c)
                await cur.execute(statement.query, statement.params, prepare=True)
                inserted = await cur.fetchone()
                assert inserted is not None  # an INSERT ... VALUES ... RETURNING answers its row
                return ops.inserted_job(spec, inserted)
            for _ in range(ops.CONFLICT_RETRIES):
                row = await self._fetch_one(c, statement)
                if row is not None:
                    return Job.from_row(row)
        raise ops.EnqueueConflictUnresolved()

    async def enqueue_many(
        self, jobs: Iterable[dict[str, Any]], *, conn: AsyncConnection | None = None
    ) -> list[int]:
        """Enqueue many jobs in one statement; return their ids in input order.

        Items are dicts of :meth:`enqueue`'s keyword arguments. Items whose
        idempotency or dedupe key matches an existing job (or an earlier item)
        get that job's id. All items are validated before anything is sent.
        """
        specs = ops.enqueue_many_specs(jobs)
        ids: list[int | None] = [None] * len(specs)
        pending = list(range(len(specs)))
        async with self._connection(conn) as c:
            for _ in range(ops.CONFLICT_RETRIES):
                if not pending:
                    break
                batch = [specs[i] for i in pending]
                statement = ops.enqueue_many_statement(self.schema, batch)
                try:
                    async with c.cursor(binary=True) as cur:
                        await cur.execute(statement.query, statement.params)
                        rows = await cur.fetchall()
                except pg_errors.DeadlockDetected:
                    if not ops.owns_transaction(conn, self._conn):
                        raise
                    continue
                if not ops.has_keys(batch):
                    return ops.ids_from_plain_bulk(rows)
                pending = ops.resolve_keyed_bulk(rows, pending, ids)
        if pending:
            raise ops.EnqueueConflictUnresolved()
        return [i for i in ids if i is not None]

    async def get(self, job_id: int, *, conn: AsyncConnection | None = None) -> Job:
        """Return the job, or raise :class:`~queue_engine.foundation.errors.JobNotFound`."""
        async with self._connection(conn) as c:
            job = ops.job_or_none(await self._fetch_one(c, ops.get_statement(self.schema, job_id)))
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def cancel(
        self,
        job_id: int,
        *,
        conn: AsyncConnection | None = None,
        message: str = "canceled by client",
    ) -> Job:
        """Cancel a queued job at once, or ask a running job to stop; return the job after."""
        async with self._connection(conn) as c:
            row = await self._fetch_one(c, ops.cancel_statement(self.schema, job_id, message))
            if row is not None:
                return Job.from_row(row)
            current = ops.job_or_none(
                await self._fetch_one(c, ops.get_statement(self.schema, job_id))
            )
        raise ops.cancel_refusal(job_id, current)

    async def retry(
        self,
        job_id: int,
        *,
        conn: AsyncConnection | None = None,
        message: str = "retried by client",
    ) -> Job:
        """Put a failed, canceled, lost or skipped job back in its queue with fresh attempts."""
        async with self._connection(conn) as c:
            try:
                row = await self._fetch_one(c, ops.retry_statement(self.schema, job_id, message))
            except pg_errors.UniqueViolation:
                raise ops.dedupe_refusal(job_id) from None
            if row is not None:
                return Job.from_row(row)
            current = ops.job_or_none(
                await self._fetch_one(c, ops.get_statement(self.schema, job_id))
            )
        raise ops.retry_refusal(job_id, current)

    # Workflows (docs/guides/workflows.md): the statements are built in
    # queue_engine.producer.workflows.operations.

    async def start_workflow(
        self,
        workflow: Workflow | str,
        params: Mapping[str, Any] | None = None,
        *,
        conn: AsyncConnection | None = None,
    ) -> WorkflowInfo:
        """Insert every node and edge of ``workflow`` in one call; return the workflow.

        ``workflow`` may be the name of a provider this process imported
        (``@workflow("name")``), built from ``params``. On the caller's
        connection the workflow exists iff the caller's transaction commits.
        With the workflow's idempotency key naming an existing workflow, that
        one is returned (``created`` False) and nothing is written. The shape
        (names, edges, cycles, job options) is checked before anything is sent.
        """
        statement = wf_ops.start_statement(self.schema, workflow, params)
        async with self._connection(conn) as c:
            row = await self._fetch_one(c, statement)
            assert row is not None  # start_workflow always answers one row
            info = await self._fetch_one(c, wf_ops.get_statement(self.schema, row["workflow_id"]))
        assert info is not None
        return WorkflowInfo.from_row(info, created=row["created"])

    async def get_workflow(
        self, workflow_id: int, *, conn: AsyncConnection | None = None
    ) -> WorkflowInfo:
        """The workflow's state and node counts (its row and tallies; no scan of its jobs)."""
        async with self._connection(conn) as c:
            row = await self._fetch_one(c, wf_ops.get_statement(self.schema, workflow_id))
        if row is None:
            raise WorkflowNotFound(workflow_id)
        return WorkflowInfo.from_row(row)

    async def list_workflows(
        self,
        *,
        state: str | None = None,
        name: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
        conn: AsyncConnection | None = None,
    ) -> Sequence[WorkflowInfo]:
        """Workflows newest first; pass the last id as ``before_id`` for the next page."""
        statement = wf_ops.list_statement(
            self.schema, state=state, name=name, limit=limit, before_id=before_id
        )
        async with self._connection(conn) as c, c.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement.query, statement.params)
            return [WorkflowInfo.from_row(r) for r in await cur.fetchall()]

    async def workflow_nodes(
        self, workflow_id: int, *, conn: AsyncConnection | None = None
    ) -> Sequence[NodeInfo]:
        """Every node of the workflow with its state and edges, parents first."""
        statement = wf_ops.nodes_statement(self.schema, workflow_id)
        async with self._connection(conn) as c, c.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement.query, statement.params)
            rows = await cur.fetchall()
        if not rows:
            await self.get_workflow(workflow_id, conn=conn)  # raises WorkflowNotFound
        return [NodeInfo.from_row(r) for r in rows]

    async def cancel_workflow(
        self,
        workflow_id: int,
        *,
        conn: AsyncConnection | None = None,
        message: str = "workflow canceled by client",
    ) -> tuple[int, int]:
        """Cancel every unfinished node; return (canceled now, running nodes asked to stop).

        Refused (:class:`~queue_engine.foundation.errors.InvalidTransition`) for a workflow
        that has already ended.
        """
        async with self._connection(conn) as c:
            row = await self._fetch_one(
                c, wf_ops.cancel_statement(self.schema, workflow_id, message)
            )
        return wf_ops.cancel_outcome(workflow_id, row)

    async def retry_workflow(
        self,
        workflow_id: int,
        *,
        conn: AsyncConnection | None = None,
        message: str = "workflow retried by client",
    ) -> int:
        """Re-run failed, canceled and lost nodes and their descendants; return how many.

        Only an ended workflow is retried (cancel a running one first).
        """
        async with self._connection(conn) as c:
            row = await self._fetch_one(
                c, wf_ops.retry_statement(self.schema, workflow_id, message)
            )
        return wf_ops.retry_outcome(workflow_id, row)

    async def provide_input(
        self, workflow_id: int, node: str, value: Any, *, conn: AsyncConnection | None = None
    ) -> bool:
        """Give an input node its value; True if provided now, False if it had been already."""
        statement = wf_ops.provide_input_statement(self.schema, workflow_id, node, value)
        async with self._connection(conn) as c:
            row = await self._fetch_one(c, statement)
        return wf_ops.input_outcome(workflow_id, node, row["outcome"] if row else None)

    async def list(
        self,
        *,
        queue: str | None = None,
        status: str | None = None,
        task: str | None = None,
        limit: int = 100,
        older_than_s: float | None = None,
        conn: AsyncConnection | None = None,
    ) -> list[Job]:
        """Return jobs newest first, filtered by queue, status, task and age.

        ``older_than_s``: only jobs created more than that many seconds ago.
        """
        statement = ops.list_statement(
            self.schema,
            queue=queue,
            status=status,
            task=task,
            limit=limit,
            older_than_s=older_than_s,
        )
        async with self._connection(conn) as c, c.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement.query, statement.params)
            return [Job.from_row(r) for r in await cur.fetchall()]
