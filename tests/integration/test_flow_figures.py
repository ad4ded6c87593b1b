"""Per-key and per-partition figures (operator/flow.py) against a real Postgres.

The statements behind ``stats``, ``top``, the API, the dashboard and the
metrics: what they count (running, the limit, jobs waiting on it; queued
and running per partition), and that past the cap they say "at least"
instead of scanning on.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support.flow import EXPECTED_KEYS, PARTITION_QUEUE, PARTITIONS, build_scene

from queue_engine.operator import flow
from queue_engine.operator.limits import list_limits

S = "queue_engine"


def test_key_figures_count_running_limit_and_waiting(conn: psycopg.Connection[Any]) -> None:
    build_scene(conn)
    rows = flow.key_flows(conn, S, limit=100)
    assert {r.key: (r.limit, r.running, r.waiting) for r in rows} == EXPECTED_KEYS
    # Busiest first: running + waiting.
    assert [r.key for r in rows][:2] == ["src:erp", "api:partner"]
    erp = next(r for r in rows if r.key == "src:erp")
    assert erp.at_limit and erp.max_running == 3 and erp.set_at is not None
    daily = next(r for r in rows if r.key == "report:daily")
    assert daily.max_running is None and daily.set_at is None and not daily.at_limit
    assert not any(r.waiting_at_least for r in rows)


def test_limits_list_is_the_operators_rows_only(conn: psycopg.Connection[Any]) -> None:
    build_scene(conn)
    assert [(r.key, r.max_running, r.waiting) for r in list_limits(conn, S)] == [
        ("api:partner", 10, 0),
        ("held:key", 0, 2),
        ("src:erp", 3, 5),
    ]
    assert [r.key for r in list_limits(conn, S, key="src:erp")] == ["src:erp"]


def test_a_delayed_job_does_not_wait_on_the_limit(conn: psycopg.Connection[Any]) -> None:
    build_scene(conn)
    conn.execute(
        f"UPDATE {S}.jobs SET available_at = now() + interval '1 hour'"
        " WHERE id IN (SELECT id FROM queue_engine.jobs"
        "  WHERE concurrency_key = 'src:erp' AND status = 'queued' LIMIT 2)"
    )
    (erp,) = flow.key_flows(conn, S, key="src:erp")
    assert erp.waiting == 3


def test_waiting_past_the_cap_is_a_lower_bound(conn: psycopg.Connection[Any]) -> None:
    build_scene(conn)
    rows = {r.key: r for r in flow.key_flows(conn, S, cap=4, limit=100)}
    # 4 + 1 due jobs read in claim order (queue etl first), never the whole backlog.
    assert sum(r.waiting for r in rows.values()) <= 5
    assert all(r.waiting_at_least for r in rows.values() if r.waiting)
    assert any(r.waiting for r in rows.values())


def test_a_deep_plain_queue_does_not_hide_the_waiting_jobs(
    conn: psycopg.Connection[Any],
) -> None:
    """Each queue is read up to the cap: a plain backlog sorted first crowds out nothing."""
    build_scene(conn)
    conn.execute(
        f"INSERT INTO {S}.jobs (queue, task) SELECT 'aaa-bulk', 't' FROM generate_series(1, 50)"
    )
    rows = {r.key: r for r in flow.key_flows(conn, S, cap=15, limit=100)}
    assert (rows["src:erp"].waiting, rows["held:key"].waiting) == (5, 2)
    # aaa-bulk's read stopped at the cap: the keys at their limit say "at least".
    assert rows["src:erp"].waiting_at_least and not rows["api:partner"].waiting_at_least


def test_partitions_deepest_first_with_running(conn: psycopg.Connection[Any]) -> None:
    build_scene(conn)
    rows = flow.top_partitions(conn, S, PARTITION_QUEUE)
    assert [(r.partition_key, r.queued, r.running) for r in rows] == [
        (k, q, r) for k, (q, r) in PARTITIONS.items()
    ]
    assert not any(r.queued_at_least for r in rows)
    assert [r.partition_key for r in flow.top_partitions(conn, S, PARTITION_QUEUE, limit=2)] == [
        "tenant-a",
        "tenant-b",
    ]
    assert flow.top_partitions(conn, S, "etl") == []
    capped = flow.top_partitions(conn, S, PARTITION_QUEUE, cap=10)
    assert all(r.queued_at_least for r in capped)
    assert sum(r.queued for r in capped) <= 11


def test_partitions_of_several_queues_merge_deepest_first(
    conn: psycopg.Connection[Any],
) -> None:
    build_scene(conn)
    conn.execute(
        f"INSERT INTO {S}.jobs (queue, task, partition_key)"
        " SELECT 'other', 't', 'tenant-z' FROM generate_series(1, 20)"
    )
    rows = flow.partitions_of(conn, S, ["other", PARTITION_QUEUE], limit=3)
    assert [(r.queue, r.partition_key, r.queued) for r in rows] == [
        (PARTITION_QUEUE, "tenant-a", 40),
        ("other", "tenant-z", 20),
        (PARTITION_QUEUE, "tenant-b", 12),
    ]


def test_a_deep_plain_backlog_does_not_hide_the_partitions(
    conn: psycopg.Connection[Any],
) -> None:
    """Plain jobs sort first in each priority: the partitions are read past them."""
    build_scene(conn)
    conn.execute(
        f"INSERT INTO {S}.jobs (queue, task) SELECT %s, 't' FROM generate_series(1, 200)",
        (PARTITION_QUEUE,),
    )
    rows = flow.top_partitions(conn, S, PARTITION_QUEUE, cap=100)
    assert [(r.partition_key, r.queued, r.running) for r in rows] == [
        (k, q, r) for k, (q, r) in PARTITIONS.items()
    ]
    assert not any(r.queued_at_least for r in rows)
