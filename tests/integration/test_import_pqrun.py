"""``queue-ctl import --from pqrun``: a populated pqrun database moves over, once.

The source is a second database of the test server with pqrun's own DDL
(tests/fixtures/legacy/pqrun.sql) and a row in every status; the engine is
the usual fresh test database.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from support.legacy import checksum, create_legacy_schema

from queue_engine.foundation.errors import ConfigError
from queue_engine.operator.importing.run import run_import
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain

#: (job_type, payload, status, priority, attempts, max_attempts, run_after offset s,
#:  timeout_seconds, dedupe_key, last_error)
ROWS: list[tuple[Any, ...]] = [
    ("pq.send", {"n": 1}, "READY", 0, 0, 5, -10, None, None, None),
    ("pq.send", {"n": 2}, "READY", 10, 0, 5, 3600, None, "send:2", None),  # delayed
    ("pq.send", {"n": 3}, "READY", -5, 2, 5, -1, 30, None, "boom"),  # a retry
    ("pq.send", {"n": 4}, "RUNNING", 500, 1, 5, -60, None, "send:4", None),
    ("pq.send", {"n": 5}, "RUNNING", 0, 5, 5, -60, None, None, None),  # its last attempt
    ("pq.send", {"n": 6}, "DONE", 0, 1, 5, -60, None, None, None),
    ("pq.send", {"n": 7}, "FAILED", 0, 5, 5, -60, None, None, "gave up"),
    ("pq.send", {"n": 8}, "CANCELLED", 0, 0, 5, -60, None, None, None),
    ("9-not-a-task", {"n": 9}, "READY", 0, 0, 5, -60, None, None, None),  # refused
    ("pq.send", [1, 2], "READY", 0, 0, 5, -60, None, None, None),  # refused: not an object
]


@pytest.fixture
def source(empty_dsn: str) -> str:
    create_legacy_schema(empty_dsn, "pqrun")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for job_type, payload, status, prio, att, mx, offset, timeout, dedupe, err in ROWS:
            conn.execute(
                "INSERT INTO jobs (job_type, payload, status, priority, attempts, max_attempts,"
                " run_after, timeout_seconds, dedupe_key, last_error, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s), %s, %s, %s,"
                " '2026-01-02T03:04:05Z')",
                (
                    job_type,
                    json.dumps(payload),
                    status,
                    prio,
                    att,
                    mx,
                    offset,
                    timeout,
                    dedupe,
                    err,
                ),
            )
    return empty_dsn


def _imported(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    rows = cur.execute(
        "SELECT m.old_id, j.* FROM queue_engine.imported_ids m"
        " JOIN queue_engine.jobs j ON j.id = m.new_id WHERE m.source = 'pqrun' AND m.kind = 'job'"
    ).fetchall()
    return {str(r["old_id"]): r for r in rows}


def _count(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM queue_engine.{table}").fetchone()
    assert row is not None
    return int(row[0])


def test_dry_run_counts_and_writes_nothing(source: str, dsn: str) -> None:
    before = checksum(source)
    with psycopg.connect(dsn, autocommit=True) as conn:
        report = run_import(conn, "queue_engine", "pqrun", source, dry_run=True)
        assert _count(conn, "jobs") == 0
        assert _count(conn, "imported_ids") == 0
    assert checksum(source) == before
    assert report.found == {
        ("job", "READY"): 5,
        ("job", "RUNNING"): 2,
        ("job", "DONE"): 1,
        ("job", "FAILED"): 1,
        ("job", "CANCELLED"): 1,
    }
    assert report.outcomes[("job", "READY", "imported")] == 3
    assert report.outcomes[("job", "RUNNING", "imported")] == 2
    assert report.outcomes[("job", "READY", "refused")] == 2
    text = "\n".join(report.lines())
    assert "dry run, nothing written" in text
    assert "clamp(100 - pqrun, 0, 1000)" in text
    assert "job DONE: 1 not moved" in text


def test_import_moves_every_unfinished_job_once(source: str, dsn: str) -> None:
    before = checksum(source)
    with psycopg.connect(dsn, autocommit=True) as conn:
        report = run_import(conn, "queue_engine", "pqrun", source, batch_size=2)
        assert report.batches == 4  # seven READY or RUNNING rows, two at a time
        jobs = _imported(conn)
        # Every READY and RUNNING job arrived, nothing finished, nothing refused.
        assert sorted(jobs) == ["1", "2", "3", "4", "5"]
        assert _count(conn, "jobs") == 5
        assert all(j["status"] == "queued" and j["task"] == "pq.send" for j in jobs.values())
        assert [jobs[k]["args"] for k in sorted(jobs)] == [{"n": n} for n in range(1, 6)]
        # Priority: 100 - p, clamped; order kept (10 before 0 before -5).
        assert {k: jobs[k]["priority"] for k in jobs} == {
            "1": 100,
            "2": 90,
            "3": 105,
            "4": 0,
            "5": 100,
        }
        assert report.priority_clamped == 1
        # Delayed keeps its time; a retry keeps its attempts, timeout and error.
        assert jobs["2"]["available_at"] > jobs["1"]["available_at"]
        assert jobs["2"]["dedupe_key"] == "send:2"
        assert (jobs["3"]["attempt"], jobs["3"]["timeout_s"], jobs["3"]["error"]) == (2, 30, "boom")
        # Running: queued with its attempt spent; the last one gets one more run.
        assert (jobs["4"]["attempt"], jobs["4"]["max_attempts"]) == (1, 5)
        assert (jobs["5"]["attempt"], jobs["5"]["max_attempts"]) == (5, 6)
        assert str(jobs["1"]["created_at"].date()) == "2026-01-02"
        assert [r.old_id for r in report.refusals] == ["9", "10"]

        # A second run adds nothing.
        again = run_import(conn, "queue_engine", "pqrun", source)
        assert _count(conn, "jobs") == 5
        assert _count(conn, "imported_ids") == 5
        assert again.outcomes[("job", "READY", "already imported")] == 3
        assert again.outcomes[("job", "RUNNING", "already imported")] == 2
        assert not any(o == "imported" for (_, _, o) in again.outcomes)
    assert checksum(source) == before


def test_imported_jobs_run_here(source: str, dsn: str) -> None:
    seen: list[int] = []
    tasks = TaskRegistry()
    tasks.register(TaskDefinition("pq.send", lambda args: seen.append(args["n"])))
    with psycopg.connect(dsn, autocommit=True) as conn:
        run_import(conn, "queue_engine", "pqrun", source)
    outcomes = drain(dsn, tasks=tasks, run_delayed=True)
    assert {o.status for o in outcomes} == {"succeeded"}
    # Lower first here, as higher first there: 4 (p=500), then 1 and 5 (p=0), then 3
    # (p=-5); 2 (p=10) was delayed, made due after them. Ties run by due time here.
    assert (seen[0], sorted(seen[1:3]), seen[3:]) == (4, [1, 5], [3, 2])
    assert sorted(o.attempt for o in outcomes) == [1, 1, 2, 3, 6]  # attempts continued


def test_a_database_without_pqrun_tables_is_refused(empty_dsn: str, dsn: str) -> None:
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        pytest.raises(ConfigError, match="is not a pqrun database"),
    ):
        run_import(conn, "queue_engine", "pqrun", empty_dsn)


def test_a_second_import_of_the_same_source_at_once_is_refused(source: str, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute(
            "SELECT pg_advisory_lock(hashtext('queue-engine:import:queue_engine:pqrun'))"
        )
        with (
            psycopg.connect(dsn, autocommit=True) as conn,
            pytest.raises(ConfigError, match="another `queue-ctl import --from pqrun`"),
        ):
            run_import(conn, "queue_engine", "pqrun", source)
        assert _count(holder, "jobs") == 0
