"""Contract: migration 0012 keeps the claim index vacuumed on a table of any size.

Every claim leaves a dead entry in ``jobs_claimable_idx`` (the update is not
HOT: ``status`` is in the index's predicate). Before 0012, a VACUUM of a
table whose dead rows sit on under 2 % of its pages skipped the index pass
(Postgres's index-vacuum bypass), so on a big table those entries stayed and
every later claim walked over them (bench/runs/2026-11-27-log.md, "What is not flat, and
why"). 0012 sets ``vacuum_index_cleanup = on`` and a fixed autovacuum
threshold on ``jobs``; its down migration restores 0001's options.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support.tables import table_options

from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, Migrator

BEFORE = 11  # the schema before 0012
#: What 0012 sets, as pg_class.reloptions spells it.
OPTIONS_0012 = {
    "vacuum_index_cleanup": "on",
    "autovacuum_vacuum_scale_factor": "0",
    "autovacuum_vacuum_threshold": "1000",
}
#: What 0001 set for the same keys (and no vacuum_index_cleanup).
OPTIONS_0001 = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "500",
}
#: Set by 0001 and left alone by 0012 (0025 sets fillfactor 100: test_jobs_fillfactor.py).
KEPT = {
    "fillfactor": "70",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_cost_delay": "1",
}


def test_migrate_sets_the_options_and_down_restores_0001(empty_dsn: str) -> None:
    migrator = Migrator(empty_dsn)
    migrator.up(BEFORE, analyze=False)
    before = table_options(empty_dsn)
    assert before == {**KEPT, **OPTIONS_0001}

    migrator.up(12, analyze=False)
    assert ENGINE_SCHEMA_VERSION >= 12
    assert table_options(empty_dsn) == {**KEPT, **OPTIONS_0012}

    migrator.down(BEFORE)
    assert table_options(empty_dsn) == before


def claim_and_vacuum(dsn: str) -> list[str]:
    """Claim a few jobs of a big table's small queue, VACUUM it; return VACUUM's messages.

    20,000 queued jobs of another queue make the table 1,250 pages; the
    20 claimed jobs sit on a few of them, under the bypass's 2 % (25 pages).
    """
    messages: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, args)"
            " SELECT 'backlog', 'noop', jsonb_build_object('n', n, 'pad', repeat('x', 200))"
            " FROM generate_series(1, 20000) n"
        )
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task)"
            " SELECT 'q', 'noop' FROM generate_series(1, 20)"
        )
        # As the worker's claim does (finish_and_claim_jobs.sql, "claimed").
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'running', attempt = attempt + 1,"
            " claimed_by = 'test-worker', started_at = now(), heartbeat_at = now(),"
            " lease_expires_at = now() + interval '60 seconds' WHERE queue = 'q'"
        )

        def notice(diag: Any) -> None:
            messages.append(f"{diag.message_primary} {diag.message_detail or ''}")

        conn.add_notice_handler(notice)
        # No INDEX_CLEANUP option: the table's vacuum_index_cleanup decides, as for autovacuum.
        conn.execute("VACUUM (VERBOSE) queue_engine.jobs")
    return [m for m in messages if 'queue_engine.jobs"' in m or "index" in m]


def claimable_entries(dsn: str) -> int:
    """Index tuples left in jobs_claimable_idx, dead or alive (the 20,000 backlog jobs are alive)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        row = conn.execute(
            # A leaf page that has a right sibling also holds a high key (not an entry).
            "SELECT sum(s.live_items + s.dead_items - (s.btpo_next <> 0)::int)"
            " FROM generate_series(1,"
            " pg_relation_size('queue_engine.jobs_claimable_idx') / 8192 - 1) b,"
            " LATERAL bt_page_stats('queue_engine.jobs_claimable_idx', b::int) s"
            " WHERE s.type = 'l'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_vacuum_removes_claimed_entries_from_the_claim_index(dsn: str) -> None:
    messages = claim_and_vacuum(dsn)
    text = "\n".join(messages)
    assert "index scan bypassed" not in text, text
    assert claimable_entries(dsn) == 20000


def test_before_0012_vacuum_bypassed_the_claim_index(dsn: str) -> None:
    """The mechanism 0012 answers: with 0001's options the claimed entries stay."""
    Migrator(dsn).down(BEFORE)
    messages = claim_and_vacuum(dsn)
    assert "index scan bypassed" in "\n".join(messages), messages
    assert claimable_entries(dsn) == 20020
