"""Finished jobs with their events, written straight into ``jobs`` (retention and archive tests)."""

from __future__ import annotations

from typing import Any

import psycopg


def finished_jobs(
    conn: psycopg.Connection[Any],
    status: str,
    n: int,
    age: str,
    *,
    queue: str = "q",
    task: str = "prune.me",
    key: str | None = None,
) -> list[int]:
    """Insert ``n`` jobs that finished ``age`` ago (1 ms apart), each with two events.

    Each has ``args`` ``{"n": i}``, a succeeded one the ``result`` ``{"ok": i}``;
    ``key`` gives them the idempotency keys ``key1``, ``key2``, ...
    """
    rows = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, args, result, created_at, "
        "started_at, finished_at, duration_ms, idempotency_key) "
        "SELECT %(queue)s, %(task)s, %(status)s, 1, jsonb_build_object('n', g), "
        "CASE WHEN %(status)s = 'succeeded' THEN jsonb_build_object('ok', g) END, "
        "now() - %(age)s::interval - interval '1 minute', "
        "now() - %(age)s::interval - interval '2 seconds', "
        "now() - %(age)s::interval + make_interval(secs => g / 1000.0), 1500, "
        "CASE WHEN %(key)s::text IS NOT NULL THEN %(key)s || g END "
        "FROM generate_series(1, %(n)s) g RETURNING id",
        {"status": status, "n": n, "age": age, "key": key, "queue": queue, "task": task},
    ).fetchall()
    ids = [int(r[0]) for r in rows]
    conn.execute(
        "INSERT INTO queue_engine.job_events (job_id, kind, to_status) "
        "SELECT id, k, 'x' FROM unnest(%s::bigint[]) id, unnest(ARRAY['claimed', 'done']) k",
        (ids,),
    )
    return ids
