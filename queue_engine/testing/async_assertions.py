"""Assertions on enqueued work for asyncio code: ``assert_enqueued_async`` and its kin.

``enqueued_jobs_async`` lists what matches, ``assert_enqueued_async``
returns it, ``refute_enqueued_async`` fails on it.

They read the jobs table through the same ``AsyncClient`` the code under
test enqueued with (or its connection, or a DSN), so a client bound to the
test's own connection (``AsyncClient(conn=...)``) sees the jobs its
uncommitted transaction wrote: a request handler that enqueued in its own
open transaction is checked on that transaction's connection, the only one
that sees the job before the commit. The filters, the subset match on args
and the failure messages (which list what *was* enqueued) are in
:mod:`queue_engine.testing.matching`.

One source for both faces: ``assertions.py`` is generated from
``async_assertions.py`` by ``scripts/async_to_sync.py``, as the clients are
(:mod:`queue_engine.producer.async_client` says why).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.config import resolve_schema
from queue_engine.foundation.db import connect_async
from queue_engine.producer.async_client import AsyncClient
from queue_engine.producer.jobs import Job
from queue_engine.testing.matching import filter_params, missing_job, unexpected_jobs

__all__ = [
    "AsyncTarget",
    "assert_enqueued_async",
    "enqueued_jobs_async",
    "refute_enqueued_async",
]

#: What the kit works on: a client, a connection, or a DSN (with ``schema=`` for the last two).
AsyncTarget = AsyncClient | psycopg.AsyncConnection[Any] | str


@asynccontextmanager
async def connection_of(target: AsyncTarget) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection that sees what ``target`` enqueued: the client's own, or a new one."""
    if isinstance(target, AsyncClient):
        # The client's connection (its pool, or the caller's connection it is
        # bound to): the only one that sees jobs of an uncommitted transaction.
        async with target._connection(None) as conn:
            yield conn
        return
    if isinstance(target, psycopg.AsyncConnection):
        yield target  # the caller's, left open and in whatever transaction it is in
        return
    async with await connect_async(target) as conn:
        yield conn


def schema_of(target: AsyncTarget, schema: str | None) -> str:
    """The engine schema: the client's, or ``schema`` (else the configured one)."""
    if isinstance(target, AsyncClient):
        return target.schema
    return resolve_schema(schema)


async def enqueued_jobs_async(
    target: AsyncTarget,
    *,
    task: str | None = None,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
    status: str | None = "queued",
    schema: str | None = None,
) -> list[Job]:
    """The jobs matching every given filter, oldest first.

    ``args`` is a subset match: a job matches when its arguments contain these
    keys with these values (nested objects too, as jsonb ``@>``). ``status``
    defaults to ``queued`` (enqueued and not yet run); None matches any status.
    """
    params = filter_params(task=task, queue=queue, args=args, status=status)
    async with connection_of(target) as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(queries.query("find_enqueued_jobs", schema_of(target, schema)), params)
        return [Job.from_row(row) for row in await cur.fetchall()]


async def assert_enqueued_async(
    target: AsyncTarget,
    *,
    task: str | None = None,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
    status: str | None = "queued",
    schema: str | None = None,
) -> Job:
    """Return the one job that matches; fail, listing what was enqueued, when none does.

    When several match, the oldest is returned: asserting "this was enqueued"
    should not fail because it was enqueued twice (use ``enqueued_jobs_async``
    to count).
    """
    found = await enqueued_jobs_async(
        target, task=task, queue=queue, args=args, status=status, schema=schema
    )
    if found:
        return found[0]
    everything = await enqueued_jobs_async(target, status=None, schema=schema)
    raise missing_job(everything, task=task, queue=queue, args=args, status=status)


async def refute_enqueued_async(
    target: AsyncTarget,
    *,
    task: str | None = None,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
    status: str | None = "queued",
    schema: str | None = None,
) -> None:
    """Fail, listing the matching jobs, when any job matches the filters."""
    found = await enqueued_jobs_async(
        target, task=task, queue=queue, args=args, status=status, schema=schema
    )
    if found:
        raise unexpected_jobs(found, task=task, queue=queue, args=args, status=status)
