"""Fair-share weights of partitions, and the partitions of a queue (``queue-ctl partitions``).

Within a queue and priority level, jobs with a ``partition_key`` (the tenant)
are claimed in turn across partitions (migration 0032,
docs/internals/flow-control.md §2). An operator gives a partition more or
fewer turns with a weight (default 1): weight 2 gets two claims for one of a
weight-1 partition. A job's turn is given when it is enqueued, so a weight
applies to the partition's jobs enqueued after it is set; jobs already queued
keep their turns. The change is recorded as controls are (``set_at`` on the
weight's row, as ``queues.updated_at`` for pause and rate): nothing else
needs to hear of it, since the enqueue reads the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.foundation.errors import ValidationError
from queue_engine.operator.audit import Actor, record_control
from queue_engine.producer.validation import (
    MAX_KEY_LENGTH,
    check_partition_key,
    check_queue_name,
)

#: A weight is more than 0 and at most this (partition_weights_weight_check).
WEIGHT_MAX = 1000.0
#: Queued jobs are counted per partition up to this many (shown as "cap+").
DEPTH_CAP = 10_000
#: At most this many partitions with queued jobs are visited by ``list``.
SCAN_MAX = 1_000
#: ``list --limit``: at most this many partitions shown.
LIMIT_MAX = 1_000


@dataclass(frozen=True, slots=True)
class WeightSet:
    """What ``partitions weight`` did: the new and previous weight, the partition's queued jobs."""

    queue: str
    partition_key: str
    weight: float
    previous: float | None
    queued: int


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition of a queue: its queued jobs (at most the cap), running jobs, weight."""

    partition_key: str
    queued: int
    running: int
    weight: float | None
    set_at: datetime | None

    @property
    def capped(self) -> bool:
        return self.queued >= DEPTH_CAP

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition_key": self.partition_key,
            "queued": self.queued,
            "queued_capped": self.capped,
            "running": self.running,
            "weight": 1.0 if self.weight is None else self.weight,
            "weight_set_at": None if self.set_at is None else self.set_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class Partitions:
    """The partitions ``list`` shows, and whether it stopped before visiting them all."""

    queue: str
    rows: list[Partition]
    more: bool


def parse_weight(value: str | float) -> float:
    """A weight: a number more than 0 and at most 1000 (1 is the default)."""
    try:
        weight = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        weight = math.nan
    # NaN fails both comparisons; inf fails the upper bound.
    if isinstance(value, bool) or not (0 < weight <= WEIGHT_MAX):
        raise ValidationError(
            f"invalid weight {value!r}: use a number more than 0 and at most {WEIGHT_MAX:g} "
            "(1 is the default; 2 gets two turns for one)"
        )
    return weight


def check_partition(queue: str, partition_key: str) -> tuple[str, str]:
    """The queue name and partition key as jobs carry them."""
    checked = check_partition_key(partition_key)
    if checked is None:
        raise ValidationError(f"a partition key is 1 to {MAX_KEY_LENGTH} characters")
    return check_queue_name(queue), checked


def check_list_args(queue: str, limit: int) -> str:
    """``list``'s queue name and ``--limit`` (1 to 1000 partitions shown)."""
    if isinstance(limit, bool) or not 1 <= limit <= LIMIT_MAX:
        raise ValidationError(
            f"invalid --limit {limit!r}: use a whole number from 1 to {LIMIT_MAX}"
        )
    return check_queue_name(queue)


def set_weight(
    conn: psycopg.Connection[Any],
    schema: str,
    queue: str,
    partition_key: str,
    weight: str | float,
    *,
    by: Actor | None = None,
) -> WeightSet:
    """Weight ``weight`` for the partition's jobs enqueued into ``queue`` from now on.

    Recorded in the audit of controls (``partition_weight_set``, target
    ``queue/partition``: a queue name has no ``/``) in the same transaction.
    """
    queue, partition_key = check_partition(queue, partition_key)
    value = parse_weight(weight)
    params = {"queue": queue, "partition_key": partition_key, "weight": value, "cap": DEPTH_CAP}
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("partitions_weight_set", schema), params).fetchone()
        assert row is not None
        record_control(
            conn,
            schema,
            control="partition_weight_set",
            target=f"{queue}/{partition_key}",
            before=None if row[0] is None else {"weight": float(row[0])},
            after={"weight": value},
            by=by,
        )
    return WeightSet(queue, partition_key, value, row[0], int(row[1]))


def clear_weight(
    conn: psycopg.Connection[Any],
    schema: str,
    queue: str,
    partition_key: str,
    *,
    by: Actor | None = None,
) -> float | None:
    """Remove the partition's weight (back to 1); return it (None: it had none, nothing recorded)."""
    queue, partition_key = check_partition(queue, partition_key)
    params = {"queue": queue, "partition_key": partition_key}
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("partitions_weight_clear", schema), params).fetchone()
        if row is not None:
            record_control(
                conn,
                schema,
                control="partition_weight_clear",
                target=f"{queue}/{partition_key}",
                before={"weight": float(row[0])},
                after=None,
                by=by,
            )
    return None if row is None else float(row[0])


def list_partitions(
    conn: psycopg.Connection[Any], schema: str, queue: str, *, limit: int = 20
) -> Partitions:
    """The ``limit`` deepest partitions of ``queue`` (and those with a weight set)."""
    queue = check_list_args(queue, limit)
    params = {"queue": queue, "limit": limit, "cap": DEPTH_CAP, "scan": SCAN_MAX}
    with schema_errors(schema):
        rows = conn.execute(queries.query("partitions_list", schema), params).fetchall()
    return Partitions(
        queue,
        [Partition(r[0], int(r[1]), int(r[2]), r[3], r[4]) for r in rows],
        any(bool(r[5]) for r in rows),
    )
