"""Assertions on enqueued work: ``enqueued_jobs``, ``assert_enqueued``, ``refute_enqueued``.

They read the jobs table through the same ``Client`` the code under test
enqueued with (or its connection, or a DSN), so a client bound to the test's
own connection (``Client(conn=...)``) sees the jobs its uncommitted
transaction wrote. The asyncio twins (an ``AsyncClient`` or an
``AsyncConnection``) are in :mod:`queue_engine.testing.async_assertions`. A
failed assertion lists what *was* enqueued: the usual reason a test misses a
job is a typo in the task name or an argument, and the listing shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from queue_engine import sql as queries
from queue_engine.client import Client
from queue_engine.config import resolve_schema
from queue_engine.db import connect
from queue_engine.jobs import Job

__all__ = ["Target", "assert_enqueued", "enqueued_jobs", "refute_enqueued"]

#: What the kit works on: a Client, a connection, or a DSN (with ``schema=`` for the last two).
Target = Client | psycopg.Connection[Any] | str

#: The most jobs a failure message lists.
LISTED_JOBS = 20
#: Read at most this many matching jobs (a test with more asks for trouble elsewhere).
MAX_JOBS = 10_000


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


def filter_params(
    *, task: str | None, queue: str | None, args: dict[str, Any] | None, status: str | None
) -> dict[str, Any]:
    """The parameters of ``sql/find_enqueued_jobs.sql`` (shared with the async assertions)."""
    return {
        "task": task,
        "queue": queue,
        "status": None if status is None else str(status),
        "args": None if args is None else Jsonb(args),
        "limit": MAX_JOBS,
    }


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
    should not fail because it was enqueued twice (use ``enqueued_jobs`` to
    count).
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


def missing_job(everything: list[Job], **filters: Any) -> AssertionError:
    """The failure of ``assert_enqueued``: what was wanted, and everything that was enqueued."""
    return AssertionError(
        f"no job enqueued with {_describe_filters(**filters)}; {_listing(everything)}"
    )


def unexpected_jobs(found: list[Job], **filters: Any) -> AssertionError:
    """The failure of ``refute_enqueued``: what was not wanted, and the jobs that matched."""
    return AssertionError(
        f"expected no job enqueued with {_describe_filters(**filters)}, "
        f"found {len(found)}: {_lines(found)}"
    )


def _describe_filters(**filters: Any) -> str:
    given = [f"{name}={value!r}" for name, value in filters.items() if value is not None]
    return ", ".join(given) if given else "any filter"


def _listing(jobs: list[Job]) -> str:
    if not jobs:
        return "no job was enqueued at all"
    return f"{len(jobs)} job(s) were enqueued: {_lines(jobs)}"


def _lines(jobs: list[Job]) -> str:
    shown = [
        f"\n  #{j.id} task={j.task!r} queue={j.queue!r} args={j.args!r} status={j.status}"
        for j in jobs[:LISTED_JOBS]
    ]
    if len(jobs) > LISTED_JOBS:
        shown.append(f"\n  ... and {len(jobs) - LISTED_JOBS} more")
    return "".join(shown)
