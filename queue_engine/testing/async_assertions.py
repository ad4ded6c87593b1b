"""The assertions on enqueued work for asyncio code: ``await assert_enqueued_async(...)``.

The same filters, subset match on args and failure messages as
:mod:`queue_engine.testing.assertions`, read through an
:class:`~queue_engine.async_client.AsyncClient` (its pool, or the connection it
is bound to) or an ``AsyncConnection``: an async request handler that enqueued
in its own open transaction is checked on that transaction's connection, the
only one that sees the job before the commit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine import sql as queries
from queue_engine.async_client import AsyncClient
from queue_engine.config import resolve_schema
from queue_engine.jobs import Job
from queue_engine.testing.assertions import filter_params, missing_job, unexpected_jobs

__all__ = [
    "AsyncTarget",
    "assert_enqueued_async",
    "enqueued_jobs_async",
    "refute_enqueued_async",
]

#: What the async assertions read through: an AsyncClient, or an AsyncConnection (``schema=``).
AsyncTarget = AsyncClient | psycopg.AsyncConnection[Any]


@asynccontextmanager
async def _connection_of(target: AsyncTarget) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    if isinstance(target, AsyncClient):
        async with target._connection(None) as conn:
            yield conn
        return
    yield target


def _schema_of(target: AsyncTarget, schema: str | None) -> str:
    return target.schema if isinstance(target, AsyncClient) else resolve_schema(schema)


async def enqueued_jobs_async(
    target: AsyncTarget,
    *,
    task: str | None = None,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
    status: str | None = "queued",
    schema: str | None = None,
) -> list[Job]:
    """The jobs matching every given filter, oldest first (see ``enqueued_jobs``)."""
    params = filter_params(task=task, queue=queue, args=args, status=status)
    async with _connection_of(target) as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(queries.query("find_enqueued_jobs", _schema_of(target, schema)), params)
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
    """Return the (oldest) matching job; fail, listing what was enqueued, when none does."""
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
