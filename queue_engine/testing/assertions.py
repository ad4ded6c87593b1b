# Generated from async_assertions.py by scripts/async_to_sync.py: do not edit by hand.
# Edit async_assertions.py, then run `python scripts/async_to_sync.py` (docs/contributing.md).
"""Assertions on enqueued work for synchronous code: ``assert_enqueued`` and its kin.

``enqueued_jobs`` lists what matches, ``assert_enqueued``
returns it, ``refute_enqueued`` fails on it.

They read the jobs table through the same ``Client`` the code under
test enqueued with (or its connection, or a DSN), so a client bound to the
test's own connection (``Client(conn=...)``) sees the jobs its
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

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.config import resolve_schema
from queue_engine.foundation.db import connect
from queue_engine.producer.client import Client
from queue_engine.producer.jobs import Job
from queue_engine.testing.matching import filter_params, missing_job, unexpected_jobs

__all__ = [
    "Target",
    "assert_enqueued",
    "enqueued_jobs",
    "refute_enqueued",
]

#: What the kit works on: a client, a connection, or a DSN (with ``schema=`` for the last two).
Target = Client | psycopg.Connection[Any] | str


@contextmanager
def connection_of(target: Target) -> Iterator[psycopg.Connection[Any]]:
    """A connection that sees what ``target`` enqueued: the client's own, or a new one."""
    if isinstance(target, Client):
        # The client's connection (its pool, or the caller's connection it is
        # bound to): the only one that sees jobs of an uncommitted transaction.
        with target._connection(None) as conn:
            yield conn
        return
    if isinstance(target, psycopg.Connection):
        yield target  # the caller's, left open and in whatever transaction it is in
        return
    with connect(target) as conn:
        yield conn


def schema_of(target: Target, schema: str | None) -> str:
    """The engine schema: the client's, or ``schema`` (else the configured one)."""
    if isinstance(target, Client):
        return target.schema
    return resolve_schema(schema)


def enqueued_jobs(
    target: Target,
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
    with connection_of(target) as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("find_enqueued_jobs", schema_of(target, schema)), params)
        return [Job.from_row(row) for row in cur.fetchall()]


def assert_enqueued(
    target: Target,
    *,
    task: str | None = None,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
    status: str | None = "queued",
    schema: str | None = None,
) -> Job:
    """Return the one job that matches; fail, listing what was enqueued, when none does.

    When several match, the oldest is returned: asserting "this was enqueued"
    should not fail because it was enqueued twice (use ``enqueued_jobs``
    to count).
    """
    found = enqueued_jobs(target, task=task, queue=queue, args=args, status=status, schema=schema)
    if found:
        return found[0]
    everything = enqueued_jobs(target, status=None, schema=schema)
    raise missing_job(everything, task=task, queue=queue, args=args, status=status)


def refute_enqueued(
    target: Target,
    *,
    task: str | None = None,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
    status: str | None = "queued",
    schema: str | None = None,
) -> None:
    """Fail, listing the matching jobs, when any job matches the filters."""
    found = enqueued_jobs(target, task=task, queue=queue, args=args, status=status, schema=schema)
    if found:
        raise unexpected_jobs(found, task=task, queue=queue, args=args, status=status)
