"""The databases, fill and statistics of ``bench/scale.py`` (which measures).

Kept apart from the measurements so each file has one job: this one sets up the
server (``lib.postgres``, with the settings below), builds the two databases
(near-empty and big) and reads the server's own counters (pg_stat_statements,
pg_stat_user_tables, relation sizes).

All bench-only SQL with parameters lives in ``bench/sql/*.sql``, loaded by
name; identifiers (database names) go through ``psycopg.sql.Identifier``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from lib.report import log
from psycopg import sql

from queue_engine.foundation.migrate import Migrator

BENCH_DIR = Path(__file__).resolve().parent
EMPTY_DB = "qe_scale_empty"
BIG_DB = "qe_scale_big"
#: Server settings of the embedded server. fsync and synchronous_commit stay at
#: their (durable) defaults; max_wal_size only spaces checkpoints out during the
#: fill; pg_stat_statements gives server time, WAL and max time per statement.
SERVER_SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "max_wal_size": "8GB",
    "shared_buffers": "1GB",
    "track_io_timing": "on",
    "log_lock_waits": "on",
    "deadlock_timeout": "100ms",
    "autovacuum_naptime": "15s",
}


def load_sql(name: str) -> str:
    """The bench statement ``bench/sql/<name>.sql``."""
    return (BENCH_DIR / "sql" / f"{name}.sql").read_text()


def exists(admin_dsn: str, name: str) -> bool:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return row is not None


def fill(dsn: str, finished: int, queued: int, chunk: int, span_days: float) -> float:
    """Fill the jobs table set-based: ``finished`` finished jobs with events, ``queued`` queued.

    Each chunk of finished jobs is written as the engine writes jobs: inserted
    queued, claimed, finished (three statements, two dead row versions per job
    for VACUUM), so the heap's pages and free space look like a table the
    engine filled.

    Nothing is disabled: every constraint, index and trigger of the migrated
    schema is in place while the rows go in. The fill's own session commits
    with synchronous_commit off (fsync stays on; a crash would lose only the
    last chunks of the fill). Returns the seconds taken, VACUUM ANALYZE included.
    """
    t0 = time.perf_counter()
    end_at = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        enqueue, claim, finish = (
            load_sql(name) for name in ("fill_enqueue", "fill_claim", "fill_finished")
        )
        for lo in range(1, finished + 1, chunk):
            hi = min(finished, lo + chunk - 1)
            t = time.perf_counter()
            params: dict[str, Any] = {
                "lo": lo,
                "hi": hi,
                "total": finished,
                "span_s": span_days * 86400,
                "end_at": end_at,
            }
            inserted = conn.execute(enqueue, params).fetchone()
            assert inserted is not None and inserted[1] == hi - lo + 1
            params["first_id"] = inserted[0]
            conn.execute(claim, params)
            conn.execute(finish, params)
            rate = (hi - lo + 1) / (time.perf_counter() - t)
            log(f"fill: {hi:,} / {finished:,} finished jobs ({rate:,.0f} jobs/s with their events)")
        t = time.perf_counter()
        conn.execute(load_sql("fill_queued"), {"n": queued})
        log(f"fill: {queued:,} queued jobs in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        conn.execute("VACUUM (ANALYZE) queue_engine.jobs")
        conn.execute("VACUUM (ANALYZE) queue_engine.job_events")
        conn.execute("CHECKPOINT")
        log(f"fill: VACUUM ANALYZE + CHECKPOINT in {time.perf_counter() - t:.1f} s")
    return time.perf_counter() - t0


# -- pg_stat_statements -------------------------------------------------------------


def dboid(admin_dsn: str, name: str) -> int:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT oid FROM pg_database WHERE datname = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def pss_reset(admin: psycopg.Connection[Any], oid: int) -> None:
    """Forget the statement statistics of one database."""
    admin.execute("SELECT pg_stat_statements_reset(0, %s::oid, 0)", (oid,))


@dataclass(frozen=True, slots=True)
class StatementTotals:
    """Summed pg_stat_statements figures of the statements matched."""

    calls: int
    total_ms: float
    max_ms: float
    rows: int
    wal_bytes: float
    #: Shared buffers hit or read.
    buffers: int = 0


def pss_totals(admin: psycopg.Connection[Any], oid: int, like: str = "%") -> StatementTotals:
    """Totals over the database's statements whose text matches ``like``."""
    row = admin.execute(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0),"
        " coalesce(max(max_exec_time), 0), coalesce(sum(rows), 0), coalesce(sum(wal_bytes), 0),"
        " coalesce(sum(shared_blks_hit + shared_blks_read), 0)"
        " FROM pg_stat_statements WHERE dbid = %s AND query LIKE %s",
        (oid, like),
    ).fetchone()
    assert row is not None
    return StatementTotals(
        int(row[0]), float(row[1]), float(row[2]), int(row[3]), float(row[4]), int(row[5])
    )


def pss_slowest(admin: psycopg.Connection[Any], oid: int) -> tuple[float, str]:
    """The statement with the largest total time in the database: (ms per call, first words)."""
    row = admin.execute(
        "SELECT total_exec_time / greatest(calls, 1), left(regexp_replace(query, '\\s+', ' ', 'g'), 70)"
        " FROM pg_stat_statements WHERE dbid = %s ORDER BY total_exec_time DESC LIMIT 1",
        (oid,),
    ).fetchone()
    return (float(row[0]), str(row[1])) if row else (0.0, "")


# -- sizes and vacuum ---------------------------------------------------------------


#: The tables whose sizes, counters and VACUUM times the bench reports.
TABLES = ("jobs", "jobs_archive", "job_events")


def sizes(conn: psycopg.Connection[Any]) -> list[tuple[str, int]]:
    """(name, bytes): the totals and heaps of :data:`TABLES`, and every index of them."""
    rows = conn.execute(
        "WITH t AS (SELECT c.oid, c.relname FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'queue_engine' AND c.relname = ANY(%(tables)s))"
        " SELECT t.relname || ' (total)', pg_total_relation_size(t.oid) FROM t"
        " UNION ALL"
        " SELECT t.relname || ' (heap+toast)', pg_table_size(t.oid) FROM t"
        " UNION ALL"
        " SELECT '  ' || ic.relname, pg_relation_size(ic.oid)"
        " FROM t JOIN pg_index i ON i.indrelid = t.oid JOIN pg_class ic ON ic.oid = i.indexrelid"
        " ORDER BY 1",
        {"tables": list(TABLES)},
    ).fetchall()
    return [(str(name), int(size)) for name, size in rows]


def migrate_to(dsn: str, version: int | None) -> None:
    """Bring the engine schema to ``version`` (None: this build's last), up or down, no ANALYZE."""
    migrator = Migrator(dsn)
    if version is not None and migrator.current_version() > version:
        migrator.down(version)
    else:
        migrator.up(version, analyze=False)


def jobs_options(conn: psycopg.Connection[Any]) -> str:
    """The jobs table's storage options (autovacuum, fillfactor) as the catalog has them."""
    row = conn.execute(
        "SELECT array_to_string(reloptions, ', ') FROM pg_class"
        " WHERE oid = 'queue_engine.jobs'::regclass"
    ).fetchone()
    return str(row[0]) if row else ""


def table_stats(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """Live/dead tuples and (auto)vacuum counts of :data:`TABLES`."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return conn.execute(
        "SELECT relname, n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count,"
        " n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del"
        " FROM pg_stat_user_tables WHERE schemaname = 'queue_engine'"
        " AND relname = ANY(%s) ORDER BY relname",
        (list(TABLES),),
    ).fetchall()


def timed_vacuum(conn: psycopg.Connection[Any]) -> dict[str, float]:
    """Seconds of a plain VACUUM of each table (what autovacuum has to do, unthrottled)."""
    out: dict[str, float] = {}
    for table in TABLES:
        t = time.perf_counter()
        conn.execute(sql.SQL("VACUUM queue_engine.{}").format(sql.Identifier(table)))
        out[table] = time.perf_counter() - t
    return out
