"""The engine keeps planner statistics fresh: after migrating, and after a burst (issue 16)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import psycopg
import pytest

from queue_engine import Client
from queue_engine.foundation import table_statistics
from queue_engine.foundation.migrate import Migrator
from queue_engine.foundation.table_statistics import TableStatistics
from queue_engine.orchestrator.analyzer import Analyzer, needs_analyze

SCHEMA = "queue_engine"


def _reltuples(conn: psycopg.Connection[tuple[object, ...]], table: str) -> float:
    row = conn.execute(
        "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [f"{SCHEMA}.{table}"]
    ).fetchone()
    assert row is not None
    return float(row[0])  # type: ignore[arg-type]


def _analyze_count(conn: psycopg.Connection[tuple[object, ...]], table: str) -> int:
    row = conn.execute(
        "SELECT analyze_count FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
        [SCHEMA, table],
    ).fetchone()
    assert row is not None
    return int(row[0])  # type: ignore[call-overload]


def test_migrate_up_analyzes_the_engine_tables(empty_dsn: str) -> None:
    applied = Migrator(empty_dsn).up()
    assert applied
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        # -1 would mean "never analyzed": the planner then guesses the size.
        assert _reltuples(conn, "jobs") == 0
        assert _reltuples(conn, "job_events") == 0
        count = _analyze_count(conn, "jobs")
        assert count == 1
        # Nothing to apply: nothing is analyzed (a restart of every daemon costs nothing).
        assert Migrator(empty_dsn).up() == []
        assert _analyze_count(conn, "jobs") == count


def test_migrate_up_without_analyze_leaves_tables_unanalyzed(empty_dsn: str) -> None:
    Migrator(empty_dsn).up(analyze=False)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _reltuples(conn, "jobs") == -1


def test_host_chain_does_not_analyze_the_engine_schema(empty_dsn: str, tmp_path: object) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "0001_app.sql").write_text("CREATE TABLE public.app_things (id int);\n")
    (folder / "0001_app.down.sql").write_text("DROP TABLE public.app_things;\n")
    Migrator(empty_dsn).up(analyze=False)
    Migrator(empty_dsn, directory=folder, ledger="public.app_migrations").up()
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert _reltuples(conn, "jobs") == -1


def _stats(changes: int, rows: float) -> TableStatistics:
    return TableStatistics("jobs", changes, rows, None)


@pytest.mark.parametrize(
    ("changes", "rows", "expected"),
    [
        (10_000, -1, True),  # a burst on a never-analyzed table
        (999, -1, False),  # below the minimum
        (10_000, 0, True),  # analyzed while empty (after a migration), then a burst
        (400_000, 1_000_000, False),  # the steady trickle autovacuum keeps up with
        (600_000, 1_000_000, True),  # more than half the table changed
    ],
)
def test_needs_analyze(changes: int, rows: float, expected: bool) -> None:
    assert needs_analyze(_stats(changes, rows), min_changes=1000, fraction=0.5) is expected


def _wait_for_changes(dsn: str, at_least: int) -> None:
    """Wait until the cumulative statistics show the inserts (backends flush them lazily)."""
    deadline = time.monotonic() + 60
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            (jobs,) = table_statistics.read(conn, SCHEMA, ["jobs"])
            if jobs.changes >= at_least:
                return
            assert time.monotonic() < deadline, f"the change counter stayed at {jobs.changes}"
            time.sleep(0.2)


def test_analyzer_analyzes_jobs_after_a_burst(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.jobs SET (autovacuum_enabled = false)")
        analyzer = Analyzer(dsn, SCHEMA)
        try:
            assert not analyzer.run_once().did_work  # an empty, just-migrated table
            with conn.transaction():
                client = Client(conn=conn)
                for _ in range(10):
                    client.enqueue_many([{"task": "noop", "queue": "burst"}] * 1000)
            conn.execute("SELECT pg_stat_force_next_flush()")
            _wait_for_changes(dsn, 10_000)
            result = analyzer.run_once()
            assert result.analyzed == ("jobs",)
            assert result.changes >= 10_000
            assert _reltuples(conn, "jobs") == 10_000
            (jobs,) = table_statistics.read(conn, SCHEMA, ["jobs"])
            assert jobs.analyzed_at is not None
            assert jobs.analyzed_at <= datetime.now(UTC)
            # The counter restarts at zero: the next check does nothing.
            assert not analyzer.run_once().did_work
        finally:
            analyzer.stop()
            analyzer.on_stop()


def test_the_orchestrator_runs_the_analyzer_on_the_leader(dsn: str) -> None:
    from queue_engine.orchestrator.orchestrator import Orchestrator, OrchestratorSettings

    orch = Orchestrator(OrchestratorSettings(dsn=dsn, schema=SCHEMA))
    analyzers = [s for s in orch.leader_services if isinstance(s, Analyzer)]
    assert len(analyzers) == 1 and analyzers[0].schema == SCHEMA
