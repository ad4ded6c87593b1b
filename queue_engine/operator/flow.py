"""Flow-control figures for operators: per-key limits and per-partition depth (issue 36 §4).

What ``queue-ctl stats`` and ``top``, ``queue-ctl limits list``, the HTTP API
(``/api/v1/limits``, ``/api/v1/partitions``), the dashboard and the metrics
show, read by one statement each (``sql/flow_keys.sql``,
``sql/flow_partitions.sql``) so every face shows the same figures. Every read
is bounded, whatever the size of the jobs table: running jobs come from the
running-key and lease indexes, queued ones from the first
``QUEUE_ENGINE_STATS_EXACT_CAP`` due jobs of the claimable index (exact below
that cap, lower bounds above it, flagged ``*_at_least``).

One row model per list, so that a figure added by another control (a key's
rate bucket, a partition's weight) is one column in its SQL file and one
field here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.operator.stats import exact_cap
from queue_engine.producer.validation import check_queue_name

#: How many keys ``stats``, ``top`` and the dashboard show, busiest first.
TOP_KEYS = 10
#: How many partitions ``stats``, ``top`` and the queue page show, deepest first.
TOP_PARTITIONS = 10
#: The most keys or partitions one read returns (the API's ``limit`` maximum).
MAX_ROWS = 1000


@dataclass(frozen=True, slots=True)
class KeyFlow:
    """One concurrency key: its limits, running jobs and jobs waiting on the limit.

    ``limit`` is the effective one (the operator's ``max_running``, else the
    largest ``concurrency_limit`` among the key's running jobs; None: no
    limit known). ``waiting`` counts due queued jobs of the key that the
    claim skips because the key is full; ``waiting_at_least``: the count read
    stopped at the cap, so it is a lower bound. ``rate`` (tokens a second),
    ``burst`` and ``tokens`` (the bucket now, below 0 while a heavy job's
    debt is repaid) are None when the key has no rate (migration 0033).
    """

    key: str
    max_running: int | None
    limit: int | None
    running: int
    waiting: int
    waiting_at_least: bool
    set_at: datetime | None
    rate: float | None = None
    burst: int | None = None
    tokens: float | None = None

    @property
    def at_limit(self) -> bool:
        """True when no more of the key's jobs may start now."""
        return self.limit is not None and self.running >= self.limit

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "max_running": self.max_running,
            "limit": self.limit,
            "running": self.running,
            "waiting": self.waiting,
            "waiting_at_least": self.waiting_at_least,
            "set_at": None if self.set_at is None else self.set_at.isoformat(),
            "rate": self.rate,
            "burst": self.burst,
            "tokens": None if self.tokens is None else round(self.tokens, 3),
        }


@dataclass(frozen=True, slots=True)
class PartitionFlow:
    """One partition of a queue: its due queued jobs and running jobs.

    ``queued_at_least``: the count read stopped at the cap (a lower bound).
    """

    queue: str
    partition_key: str
    queued: int
    running: int
    queued_at_least: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "partition_key": self.partition_key,
            "queued": self.queued,
            "running": self.running,
            "queued_at_least": self.queued_at_least,
        }


def key_flows(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    key: str | None = None,
    with_running: bool = True,
    busiest: bool = True,
    limit: int = TOP_KEYS,
    cap: int | None = None,
) -> list[KeyFlow]:
    """Per-key figures (``sql/flow_keys.sql``).

    ``with_running``: also keys without an operator's limit that have running
    jobs (False: the operators' limits only). ``busiest``: most running +
    waiting first (else by key). ``cap``: due queued jobs read to count
    waiting ones (None: ``QUEUE_ENGINE_STATS_EXACT_CAP``).
    """
    params = {
        "key": key,
        "with_running": with_running,
        "busiest": busiest,
        "limit": limit,
        "cap": cap if cap is not None else exact_cap(),
    }
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.query("flow_keys", schema), params).fetchall()
    return [
        KeyFlow(
            key=r["key"],
            max_running=r["operator_limit"],
            limit=r["effective_limit"],
            running=int(r["running"]),
            waiting=int(r["waiting"]),
            waiting_at_least=bool(r["waiting_at_least"]),
            set_at=r["set_at"],
            rate=None if r["rate"] is None else float(r["rate"]),
            burst=None if r["burst"] is None else int(r["burst"]),
            tokens=None if r["tokens"] is None else float(r["tokens"]),
        )
        for r in rows
    ]


def top_partitions(
    conn: psycopg.Connection[Any],
    schema: str,
    queue: str,
    *,
    limit: int = TOP_PARTITIONS,
    cap: int | None = None,
) -> list[PartitionFlow]:
    """The deepest partitions of ``queue`` (``sql/flow_partitions.sql``), with running jobs."""
    check_queue_name(queue)
    params = {"queue": queue, "limit": limit, "cap": cap if cap is not None else exact_cap()}
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.query("flow_partitions", schema), params).fetchall()
    return [
        PartitionFlow(
            queue=queue,
            partition_key=r["partition_key"],
            queued=int(r["queued"]),
            running=int(r["running"]),
            queued_at_least=bool(r["queued_at_least"]),
        )
        for r in rows
    ]


def partitions_of(
    conn: psycopg.Connection[Any],
    schema: str,
    queues: list[str],
    *,
    limit: int = TOP_PARTITIONS,
    cap: int | None = None,
) -> list[PartitionFlow]:
    """The deepest ``limit`` partitions over ``queues`` (one bounded read per queue)."""
    rows = [p for q in queues for p in top_partitions(conn, schema, q, limit=limit, cap=cap)]
    rows.sort(key=lambda p: (-p.queued, -p.running, p.queue, p.partition_key))
    return rows[:limit]
