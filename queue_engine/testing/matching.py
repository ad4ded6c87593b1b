"""What the enqueue assertions match, and how their failures read.

Shared by :mod:`queue_engine.testing.async_assertions` and the
``assertions`` generated from it: the filters become the parameters of
``sql/find_enqueued_jobs.sql``, and a failed assertion lists what *was*
enqueued: the usual reason a test misses a job is a typo in the task name or
an argument, and the listing shows it.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from queue_engine.producer.jobs import Job

#: The most jobs a failure message lists.
LISTED_JOBS = 20
#: Read at most this many matching jobs (a test with more asks for trouble elsewhere).
MAX_JOBS = 10_000


def filter_params(
    *, task: str | None, queue: str | None, args: dict[str, Any] | None, status: str | None
) -> dict[str, Any]:
    """The parameters of ``sql/find_enqueued_jobs.sql``."""
    return {
        "task": task,
        "queue": queue,
        "status": None if status is None else str(status),
        "args": None if args is None else Jsonb(args),
        "limit": MAX_JOBS,
    }


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
