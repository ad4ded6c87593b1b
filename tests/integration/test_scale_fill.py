"""The scale bench's fill writes jobs as the engine does, so its figures are about the engine's pages.

``bench/scale_db.fill`` inserts each chunk queued, claims it and finishes it
(three statements, through the schema's triggers and transition guard), then
writes the events the engine writes. A fill that broke (a chunk's ids
misread, a guard refusal, events for the wrong jobs) would measure another
table than the one it describes (bench/runs/2026-11-27-log.md, "Where new jobs go").
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scale_db


def table_updates(conn: psycopg.Connection[tuple[Any, ...]]) -> int:
    """Rows updated in jobs, once the fill's backend has reported its statistics (at its exit)."""
    for _ in range(100):
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'queue_engine.jobs'::regclass"
        ).fetchone()
        if row is not None and row[0] > 0:
            return int(row[0])
        time.sleep(0.1)
    return 0


def test_fill_writes_finished_jobs_through_claim_and_finish(dsn: str) -> None:
    scale_db.fill(dsn, finished=1000, queued=40, chunk=300, span_days=90)
    with psycopg.connect(dsn, autocommit=True) as conn:
        statuses = dict(
            conn.execute(
                "SELECT status, count(*) FROM queue_engine.jobs GROUP BY status"
            ).fetchall()
        )
        # g % 100: < 88 succeeded, < 96 failed, else canceled; the backlog is queued.
        assert statuses == {"succeeded": 880, "failed": 80, "canceled": 40, "queued": 40}
        bad = conn.execute(
            "SELECT count(*) FROM queue_engine.jobs WHERE status <> 'queued' AND ("
            " finished_at IS NULL OR lease_expires_at IS NOT NULL"
            " OR (status = 'canceled') <> (claimed_by IS NULL)"
            " OR (status = 'succeeded') <> (result IS NOT NULL)"
            " OR (status = 'failed') <> (error IS NOT NULL)"
            " OR attempt <> CASE status WHEN 'succeeded' THEN 1 WHEN 'failed' THEN 3 ELSE 0 END)"
        ).fetchone()
        assert bad == (0,)
        # Every finished job was updated twice but a canceled one once: the dead
        # versions the engine's claim and finish leave behind.
        assert table_updates(conn) == 1000 + 960
        events = dict(
            conn.execute(
                "SELECT kind, count(*) FROM queue_engine.job_events GROUP BY kind"
            ).fetchall()
        )
        assert events == {
            "claimed": 880 + 80 * 3,
            "retry_scheduled": 80 * 2,
            "succeeded": 880,
            "failed": 80,
            "canceled": 40,
        }
        orphans = conn.execute(
            "SELECT count(*) FROM queue_engine.job_events e"
            " JOIN queue_engine.jobs j ON j.id = e.job_id WHERE j.status = 'queued'"
        ).fetchone()
        assert orphans == (0,)
