"""Assertions on enqueued work: ``enqueued_jobs``, ``assert_enqueued``, ``refute_enqueued``.

They read the jobs table through the same ``Client`` the code under test
enqueued with (or a DSN), so a client bound to the test's own connection
(``Client(conn=...)``) sees the jobs its uncommitted transaction wrote. A
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

#: What the kit works on: a Client, or a DSN (with ``schema=``).
Target = Client | str

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
    with connect(target) as conn:
        yield conn


def schema_of(target: Target, schema: str | None) -> str:
    """The engine schema: the client's, or ``schema`` (else the configured one) for a DSN."""
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
    params = {
        "task": task,
        "queue": queue,
        "status": None if status is None else str(status),
        "args": None if args is None else Jsonb(args),
        "limit": MAX_JOBS,
    }
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
    should not fail because it was enqueued twice (use ``enqueued_jobs`` to
    count).
    """
    found = enqueued_jobs(target, task=task, queue=queue, args=args, status=status, schema=schema)
    if found:
        return found[0]
    wanted = _describe_filters(task=task, queue=queue, args=args, status=status)
    everything = enqueued_jobs(target, status=None, schema=schema)
    raise AssertionError(f"no job enqueued with {wanted}; {_listing(everything)}")


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
        wanted = _describe_filters(task=task, queue=queue, args=args, status=status)
        raise AssertionError(
            f"expected no job enqueued with {wanted}, found {len(found)}: {_lines(found)}"
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
