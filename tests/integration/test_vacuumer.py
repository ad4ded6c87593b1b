"""The leader's vacuumer clears the claim index of the entries claims left dead (issue 15)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator

import psycopg
import pytest

from queue_engine import Client
from queue_engine.foundation import table_statistics
from queue_engine.foundation.table_statistics import TableStatistics
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.vacuumer import Vacuumer

SCHEMA = "queue_engine"
QUEUE = "vac"

#: The claim's scan as the worker's statement runs it (finish_and_claim_jobs.sql, "candidate").
CANDIDATE = f"""
EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
SELECT j.id FROM {SCHEMA}.jobs j
WHERE j.queue = '{QUEUE}' AND j.status = 'queued' AND j.available_at <= now()
ORDER BY j.priority, j.available_at, j.id
LIMIT 1 FOR UPDATE SKIP LOCKED
"""


def _statistics(conn: psycopg.Connection[tuple[object, ...]]) -> TableStatistics:
    (jobs,) = table_statistics.read(conn, SCHEMA, ["jobs"])
    return jobs


def _wait_for_dead_rows(conn: psycopg.Connection[tuple[object, ...]], at_least: int) -> None:
    """Wait until the cumulative statistics show the claims (backends flush them lazily)."""
    deadline = time.monotonic() + 60
    while (dead := _statistics(conn).dead_rows) < at_least:
        assert time.monotonic() < deadline, f"n_dead_tup of jobs stayed at {dead}"
        time.sleep(0.1)


def _claim_scan_buffers(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Shared buffers the claim's index scan touched to find the next job (rolled back)."""
    with conn.transaction(force_rollback=True):
        row = conn.execute(CANDIDATE).fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(str(row[0]))
    return int(plan[0]["Plan"]["Shared Hit Blocks"]) + int(plan[0]["Plan"]["Shared Read Blocks"])


def _claim_all_but_one(conn: psycopg.Connection[tuple[object, ...]], n: int) -> None:
    """Enqueue ``n`` + 1 jobs and claim the first ``n`` as workers would: ``n`` dead claim entries."""
    client = Client(conn=conn)
    client.enqueue_many([{"task": "noop", "queue": QUEUE}] * n)
    client.enqueue("noop", queue=QUEUE)  # the one left, behind the claimed ones in the index
    conn.execute(
        f"""UPDATE {SCHEMA}.jobs SET status = 'running', attempt = attempt + 1,
                claimed_by = 'test', started_at = now(), heartbeat_at = now(),
                lease_expires_at = now() + interval '5 minutes'
            WHERE id IN (SELECT id FROM {SCHEMA}.jobs WHERE queue = %s
                         ORDER BY id LIMIT %s)""",
        [QUEUE, n],
    )
    conn.execute("SELECT pg_stat_force_next_flush()")


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(dsn, autocommit=True) as c:
        # Autovacuum must not do the vacuumer's work (or take its lock) in the middle of a test.
        c.execute(f"ALTER TABLE {SCHEMA}.jobs SET (autovacuum_enabled = false)")
        yield c


@pytest.fixture
def vacuumer(dsn: str) -> Iterator[Vacuumer]:
    service = Vacuumer(dsn, SCHEMA, dead_rows=1000, stagger_s=0)
    yield service
    service.on_stop()


def test_below_the_threshold_nothing_is_vacuumed(
    conn: psycopg.Connection[tuple[object, ...]], vacuumer: Vacuumer
) -> None:
    _claim_all_but_one(conn, 200)
    _wait_for_dead_rows(conn, 200)
    count = _statistics(conn).vacuum_count
    result = vacuumer.run_once()
    assert not result.vacuumed and result.dead_before >= 200
    assert _statistics(conn).vacuum_count == count


def test_a_vacuum_clears_the_dead_claim_entries(
    conn: psycopg.Connection[tuple[object, ...]], vacuumer: Vacuumer
) -> None:
    _claim_all_but_one(conn, 3000)
    _wait_for_dead_rows(conn, 3000)
    _claim_scan_buffers(conn)  # the first scan marks the dead entries; later ones step over them
    before = _claim_scan_buffers(conn)
    vacuums = metrics.counters()["vacuums"]
    result = vacuumer.run_once()
    assert result.vacuumed and not result.blocked and not result.skipped
    assert result.dead_before >= 3000
    assert result.dead_after < 100
    assert metrics.counters()["vacuums"] == vacuums + 1
    after = _claim_scan_buffers(conn)
    # 3,000 dead entries fill a dozen leaf pages the claim no longer reads.
    assert before >= 10
    assert after <= 5 < before
    # The count restarts low: the next check does not vacuum again.
    assert not vacuumer.run_once().vacuumed


def test_a_held_horizon_is_warned_about_once_and_backed_off(
    dsn: str,
    conn: psycopg.Connection[tuple[object, ...]],
    vacuumer: Vacuumer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with psycopg.connect(dsn) as holder:
        # A snapshot taken before the claims: VACUUM may not remove what it could still see.
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute(f"SELECT count(*) FROM {SCHEMA}.jobs").fetchone()
        _claim_all_but_one(conn, 2000)
        _wait_for_dead_rows(conn, 2000)
        with caplog.at_level(logging.WARNING, logger="queue_engine.vacuumer"):
            result = vacuumer.run_once()
            assert result.vacuumed and result.blocked
            assert result.dead_after >= 2000
            assert vacuumer.pacer.blocked_s == vacuumer.interval_s
            # Straight after, the pacer waits: no VACUUM that would remove nothing again.
            again = vacuumer.run_once()
            assert not again.vacuumed
        warnings = [r for r in caplog.records if "vacuumer.blocked" in r.getMessage()]
        assert len(warnings) == 1
        holder.rollback()


def test_a_table_another_vacuum_holds_is_skipped_not_waited_for(
    dsn: str, conn: psycopg.Connection[tuple[object, ...]], vacuumer: Vacuumer
) -> None:
    _claim_all_but_one(conn, 1500)
    _wait_for_dead_rows(conn, 1500)
    count = _statistics(conn).vacuum_count
    with psycopg.connect(dsn) as other:
        # VACUUM's own lock, as autovacuum holds it while it works on the table.
        other.execute(f"LOCK TABLE {SCHEMA}.jobs IN SHARE UPDATE EXCLUSIVE MODE")
        result = vacuumer.run_once()
        assert result.skipped and not result.vacuumed and not result.blocked
        assert _statistics(conn).vacuum_count == count
        other.rollback()
    assert vacuumer.pacer.blocked_s == 0.0


def test_a_lost_session_is_dropped_and_the_next_check_connects_again(
    conn: psycopg.Connection[tuple[object, ...]], vacuumer: Vacuumer
) -> None:
    assert not vacuumer.run_once().vacuumed  # opens the vacuumer's session
    lost = vacuumer.db.get().info.backend_pid
    conn.execute("SELECT pg_terminate_backend(%s)", [lost])
    with pytest.raises(psycopg.OperationalError):
        vacuumer.run_once()
    assert not vacuumer.db.is_open  # gone: the next check (after the backoff) connects again
    assert not vacuumer.run_once().vacuumed
    assert vacuumer.db.get().info.backend_pid != lost


def test_from_env_reads_the_settings(monkeypatch: pytest.MonkeyPatch, dsn: str) -> None:
    monkeypatch.setenv("QUEUE_ENGINE_VACUUM_DEAD_ROWS", "0")
    assert Vacuumer.from_env(dsn, SCHEMA) is None
    monkeypatch.setenv("QUEUE_ENGINE_VACUUM_DEAD_ROWS", "2500")
    monkeypatch.setenv("QUEUE_ENGINE_VACUUM_S", "0.5")
    service = Vacuumer.from_env(dsn, SCHEMA)
    assert service is not None
    assert service.pacer.dead_rows == 2500 and service.interval_s == 0.5


def test_the_orchestrator_runs_the_vacuumer_on_the_leader(dsn: str) -> None:
    from queue_engine.orchestrator.orchestrator import Orchestrator, OrchestratorSettings

    orch = Orchestrator(OrchestratorSettings(dsn=dsn, schema=SCHEMA))
    vacuumers = [s for s in orch.leader_services if isinstance(s, Vacuumer)]
    assert len(vacuumers) == 1 and vacuumers[0].schema == SCHEMA
