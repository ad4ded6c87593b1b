"""A realistic flow-control scene in a real database: keys at and under their limits, partitions.

Rows are written with plain INSERTs (running rows as a worker's claim leaves
them), so tests of what *shows* the figures (``stats``, ``top``, the API,
the dashboard, the metrics) need no worker. :data:`EXPECTED_KEYS` and
:data:`EXPECTED_PARTITIONS` are what every face must show for it.
"""

from __future__ import annotations

from typing import Any

import psycopg

S = "queue_engine"

#: key -> (operator's limit or None, the jobs' own limit, running, due queued).
KEYS: dict[str, tuple[int | None, int | None, int, int]] = {
    "src:erp": (3, None, 3, 5),  # at its limit: 5 waiting
    "api:partner": (10, None, 2, 4),  # room left: none waiting
    "report:daily": (None, 2, 1, 2),  # the jobs' own limit, room left
    "held:key": (0, None, 0, 2),  # held by an operator: 2 waiting
}
#: key -> (limit, running, waiting) as every face shows them.
EXPECTED_KEYS = {
    "src:erp": (3, 3, 5),
    "api:partner": (10, 2, 0),
    "report:daily": (2, 1, 0),
    "held:key": (0, 0, 2),
}
#: Queue of the partitioned jobs.
PARTITION_QUEUE = "ingest"
#: partition -> (due queued, running) in PARTITION_QUEUE.
PARTITIONS: dict[str, tuple[int, int]] = {
    "tenant-a": (40, 2),
    "tenant-b": (12, 0),
    "tenant-c": (3, 1),
}


def _running(conn: psycopg.Connection[Any], queue: str, **columns: Any) -> None:
    names = ", ".join(columns)
    marks = ", ".join(f"%({c})s" for c in columns)
    conn.execute(
        f"INSERT INTO {S}.jobs (queue, task, status, attempt, claimed_by, started_at,"
        f" lease_expires_at, {names}) VALUES (%(queue)s, 't', 'running', 1, 'w-1', now(),"
        f" now() + interval '5 minutes', {marks})",
        {"queue": queue, **columns},
    )


def _queued(conn: psycopg.Connection[Any], queue: str, n: int, **columns: Any) -> None:
    names = "".join(f", {c}" for c in columns)
    marks = "".join(f", %({c})s" for c in columns)
    conn.execute(
        f"INSERT INTO {S}.jobs (queue, task{names})"
        f" SELECT %(queue)s, 't'{marks} FROM generate_series(1, %(n)s)",
        {"queue": queue, "n": n, **columns},
    )


def build_scene(conn: psycopg.Connection[Any]) -> None:
    """Write the scene: the keys of :data:`KEYS` in queue ``etl``, the partitions in ``ingest``."""
    for key, (operator, own, running, queued) in KEYS.items():
        if operator is not None:
            conn.execute(
                f"INSERT INTO {S}.concurrency_limits (key, max_running) VALUES (%s, %s)",
                (key, operator),
            )
        for _ in range(running):
            _running(conn, "etl", concurrency_key=key, concurrency_limit=own)
        _queued(conn, "etl", queued, concurrency_key=key, concurrency_limit=own)
    for part, (queued, running) in PARTITIONS.items():
        for _ in range(running):
            _running(conn, PARTITION_QUEUE, partition_key=part)
        _queued(conn, PARTITION_QUEUE, queued, partition_key=part)
    _queued(conn, PARTITION_QUEUE, 5)  # jobs without a partition: not a partition
