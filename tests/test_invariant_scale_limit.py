"""Invariant: at most ``scale_limit`` workers of a queue run jobs at once, cluster-wide.

Six real workers (``Worker`` in threads, each with its own database session)
race for a queue scaled to 2. Every handler records its wall-clock start and
end; at no instant may more than two of those intervals overlap, and only two
workers may ever run anything while the limit holds (slots are session
advisory locks: exclusive, never handed over while their holder lives).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import psycopg
from support.workers import all_in, create_log_table, running_worker, wait_until

from queue_engine import Client

S = "queue_engine"
Q = "wt"


def max_overlap(intervals: list[tuple[Any, Any]]) -> int:
    """The most intervals open at one instant (an end at t closes before a start at t opens)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    edges.sort(key=lambda edge: (edge[0], edge[1]))
    best = current = 0
    for _, step in edges:
        current += step
        best = max(best, current)
    return best


def test_max_overlap_counts_what_it_should() -> None:
    assert max_overlap([(0, 2), (1, 3), (2, 4)]) == 2
    assert max_overlap([(0, 5), (1, 2), (1, 3)]) == 3
    assert max_overlap([(0, 1), (1, 2)]) == 1


def test_scale_limit_is_never_exceeded_by_racing_workers(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    create_log_table(dsn)
    conn.execute(f"INSERT INTO {S}.queues (name, scale_limit) VALUES (%s, 2)", (Q,))
    with ExitStack() as stack:
        workers = [stack.enter_context(running_worker(dsn)) for _ in range(6)]
        wait_until(
            lambda: (
                conn.execute(
                    f"SELECT count(*) FROM {S}.workers WHERE id = ANY(%s) AND state = 'parked'",
                    ([w.worker_id for w in workers],),
                ).fetchone()
                == (4,)
            ),
            what="four surplus workers parked",
        )
        client.enqueue_many(
            [{"task": "record", "queue": Q, "args": {"sleep": 0.03}} for _ in range(40)]
        )
        wait_until(all_in(dsn, {"succeeded"}), timeout=60, what="all jobs succeeded")
    intervals = conn.execute("SELECT started, ended FROM worker_test_log").fetchall()
    assert len(intervals) == 40
    assert max_overlap(intervals) == 2
    ran = conn.execute(f"SELECT count(DISTINCT claimed_by) FROM {S}.jobs").fetchone()
    assert ran == (2,)
