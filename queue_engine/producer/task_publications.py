"""A task's defaults in the database: workers publish their registry, anyone reads it.

``@task("email.send", queue="email", max_attempts=3)`` lives in the processes
that import the app. So that a job of that task enqueued from anywhere else
(``queue-ctl enqueue``, the HTTP API, plain SQL, a producer that never
imported the app) gets the same defaults, a worker publishes its registry
when it starts (:func:`publish`, ``sql/publish_tasks.sql``): one row per task
in ``task_publications`` for the worker, and the task's row of
``task_defaults`` set to it. Every enqueue path fills the options its caller
left unset from ``task_defaults`` (migration 0028 has the rules).

Several workers may publish one task with different defaults (two versions
of the app during a rolling deploy): the newest publication is the one in
effect. :func:`read` answers what is known, for ``queue-ctl tasks``, with
each publication still on record (it goes with its worker's row) and whether
the workers alive now disagree (:attr:`PublishedTask.conflicts`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.producer.retry import policy_data
from queue_engine.producer.tasks import TaskDefinition
from queue_engine.producer.validation import DEFAULTED_OPTIONS

Connection = psycopg.Connection[Any]


def publication_params(
    tasks: Iterable[TaskDefinition], *, worker_id: str, host: str, pid: int, app: str | None
) -> dict[str, Any]:
    """The parameters of ``publish_tasks.sql``: one array per column, tasks by name."""
    ordered = sorted(tasks, key=lambda t: t.name)
    return {
        "task": [t.name for t in ordered],
        "queue": [t.queue for t in ordered],
        "priority": [t.priority for t in ordered],
        "max_attempts": [t.max_attempts for t in ordered],
        "timeout_s": [t.timeout_s for t in ordered],
        "lease_ttl_s": [t.lease_ttl_s for t in ordered],
        "stall_timeout_s": [t.stall_timeout_s for t in ordered],
        "retry": [json.dumps(policy_data(t.retry)) for t in ordered],
        "worker_id": worker_id,
        "host": host,
        "pid": pid,
        "app": app,
    }


def publish(
    conn: Connection,
    schema: str,
    tasks: Iterable[TaskDefinition],
    *,
    worker_id: str,
    host: str,
    pid: int,
    app: str | None,
) -> int:
    """Publish ``tasks`` as declared by the worker ``worker_id`` (registered first); how many.

    One statement; on an autocommit connection it is its own transaction.
    """
    params = publication_params(tasks, worker_id=worker_id, host=host, pid=pid, app=app)
    with schema_errors(schema):
        row = conn.execute(queries.query("publish_tasks", schema), params).fetchone()
    assert row is not None  # a SELECT of two counts
    return int(row[0])


@dataclass(frozen=True, slots=True)
class Defaults:
    """The defaults one publication declares for a task (the five an enqueue applies, and two shown)."""

    queue: str
    priority: int
    max_attempts: int
    timeout_s: int | None
    lease_ttl_s: int | None
    stall_timeout_s: int | None
    retry: dict[str, Any] | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> Defaults:
        """From a row (or JSON object) with these keys."""
        return cls(
            queue=row["queue"],
            priority=int(row["priority"]),
            max_attempts=int(row["max_attempts"]),
            timeout_s=row["timeout_s"],
            lease_ttl_s=row["lease_ttl_s"],
            stall_timeout_s=row["stall_timeout_s"],
            retry=row["retry"],
        )

    def applied(self) -> tuple[Any, ...]:
        """The values an enqueue applies, in :data:`DEFAULTED_OPTIONS` order."""
        return tuple(getattr(self, name) for name in DEFAULTED_OPTIONS)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class Publication:
    """One worker's publication of a task: who, when, what, and whether it is alive now."""

    worker_id: str
    host: str
    pid: int
    app: str | None
    published_at: datetime
    #: Seconds since ``published_at``, by the database clock.
    age_s: float
    defaults: Defaults
    #: ``live``, ``stopped`` or ``dead``, as ``queue-ctl workers`` says; ``gone``
    #: once the worker's row was pruned (only the publication in effect outlives it).
    liveness: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return {
            "worker_id": self.worker_id,
            "host": self.host,
            "pid": self.pid,
            "app": self.app,
            "published_at": self.published_at.isoformat(),
            "age_s": self.age_s,
            "liveness": self.liveness,
            **self.defaults.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class PublishedTask:
    """A task as the database knows it: the defaults in effect and their publications."""

    task: str
    #: In effect (``task_defaults``): the newest publication. Its liveness is
    #: its worker's, or ``gone`` once the worker's row was pruned.
    effective: Publication
    #: Every publication still on record, newest first.
    publications: tuple[Publication, ...]

    @property
    def defaults(self) -> Defaults:
        """The defaults every enqueue path applies to the options it leaves unset."""
        return self.effective.defaults

    @property
    def conflicts(self) -> dict[str, list[Any]]:
        """The options on which the defaults in effect and live publishers disagree.

        Option name -> the distinct values, the one in effect first. Empty
        when they agree: a stopped or dead worker's older publication is
        history, not a conflict.
        """
        seen: dict[str, list[Any]] = {name: [] for name in DEFAULTED_OPTIONS}
        for defaults in (
            self.defaults,
            *(p.defaults for p in self.publications if p.liveness == "live"),
        ):
            for name, value in zip(DEFAULTED_OPTIONS, defaults.applied(), strict=True):
                if value not in seen[name]:
                    seen[name].append(value)
        return {name: values for name, values in seen.items() if len(values) > 1}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, as ``queue-ctl tasks --json`` prints it."""
        return {
            "task": self.task,
            **self.effective.to_dict(),
            "conflicts": self.conflicts,
            "publications": [p.to_dict() for p in self.publications],
        }


def _publication(item: dict[str, Any]) -> Publication:
    """From a row of ``list_tasks.sql`` or one of its publications (JSON: times as text)."""
    published_at = item["published_at"]
    return Publication(
        worker_id=item["worker_id"],
        host=item["host"],
        pid=int(item["pid"]),
        app=item["app"],
        published_at=published_at
        if isinstance(published_at, datetime)
        else datetime.fromisoformat(published_at),
        age_s=float(item["age_s"]),
        defaults=Defaults.of(item),
        liveness=item["liveness"],
    )


def read(
    conn: Connection, schema: str, *, dead_after_s: float, task: str | None = None
) -> list[PublishedTask]:
    """Every published task (or only ``task``), by name.

    ``dead_after_s``: heartbeat age after which a worker that did not stop
    counts as dead (``queue_engine.foundation.settings.dead_after_s()``).
    """
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            queries.query("list_tasks", schema), {"task": task, "dead_after_s": dead_after_s}
        )
        rows = cur.fetchall()
    known = []
    for r in rows:
        publications = tuple(_publication(p) for p in r["publications"])
        liveness = next((p.liveness for p in publications if p.worker_id == r["worker_id"]), "gone")
        known.append(
            PublishedTask(
                task=r["task"],
                effective=_publication({**r, "liveness": liveness}),
                publications=publications,
            )
        )
    return known
