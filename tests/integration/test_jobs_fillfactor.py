"""Contract: migration 0025 lets new jobs fill a page before they move to the next.

With 0001's fillfactor 70, an INSERT asks the free-space map for room for the
row plus a 30 % reserve; after a VACUUM of a table whose jobs were claimed and
finished, most pages hold that reserve plus a few hundred bytes, so each takes
one or two new jobs and a batch spreads over hundreds of pages (a page read
and a full-page WAL image each on a big table: bench/runs/2026-11-27-log.md, "Where new
jobs go: fillfactor 100"). 0025 sets fillfactor 100; its down migration
restores 70.
"""

from __future__ import annotations

import psycopg
from support.tables import table_options

from queue_engine.foundation.migrate import Migrator

BEFORE = 24  # the schema before 0025

#: Jobs written as the engine writes them: inserted queued, claimed, finished
#: (three row versions, two of them dead once finished), as the worker's
#: statements (finish_and_claim_jobs.sql) set these columns.
HISTORY = (
    "INSERT INTO queue_engine.jobs (queue, task, args)"
    " SELECT 'done', 'noop', jsonb_build_object('n', n, 'pad', repeat('x', 40 + n % 80))"
    " FROM generate_series(1, 2000) n",
    "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'test-worker',"
    " started_at = now(), heartbeat_at = now(), lease_expires_at = now() + interval '60 s'"
    " WHERE queue = 'done' AND status = 'queued'",
    "UPDATE queue_engine.jobs SET status = 'succeeded', finished_at = now(), duration_ms = 5,"
    " lease_expires_at = NULL, result = jsonb_build_object('ok', true)"
    " WHERE queue = 'done' AND status = 'running'",
)


#: Rounds of HISTORY, each followed by a VACUUM (as autovacuum runs between
#: a live table's bursts): later rounds insert into the free space earlier
#: ones left, which is what fragments the pages.
CYCLES = 10


def pages_taken_by_new_jobs(dsn: str) -> int:
    """Write a finished history, VACUUM it, insert 500 jobs; return the heap pages they landed on."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE queue_engine.jobs SET (autovacuum_enabled = false)")
        for _ in range(CYCLES):
            for statement in HISTORY:
                conn.execute(statement)
            conn.execute("VACUUM queue_engine.jobs")
        row = conn.execute(
            "WITH new AS ("
            " INSERT INTO queue_engine.jobs (queue, task, args)"
            " SELECT 'new', 'noop', jsonb_build_object('n', n) FROM generate_series(1, 500) n"
            " RETURNING ctid)"
            " SELECT count(DISTINCT (ctid::text::point)[0]) FROM new"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_migrate_sets_fillfactor_100_and_down_restores_70(empty_dsn: str) -> None:
    migrator = Migrator(empty_dsn)
    migrator.up(BEFORE, analyze=False)
    assert table_options(empty_dsn)["fillfactor"] == "70"
    migrator.up(analyze=False)
    assert table_options(empty_dsn)["fillfactor"] == "100"
    migrator.down(BEFORE)
    assert table_options(empty_dsn)["fillfactor"] == "70"


def test_new_jobs_fill_pages_of_a_vacuumed_history(dsn: str) -> None:
    # 500 small jobs fit on about 10 pages; the old fillfactor put them on hundreds.
    assert pages_taken_by_new_jobs(dsn) <= 25


def test_the_old_fillfactor_scatters_them(empty_dsn: str) -> None:
    """The same history under schema 24: what 0025 removes (so the test above can fail)."""
    Migrator(empty_dsn).up(BEFORE, analyze=False)
    assert pages_taken_by_new_jobs(empty_dsn) >= 100
