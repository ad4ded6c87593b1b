"""``queue-ctl import --from dataloader``: dl_jobs moves over with every field, once.

The source is a second database of the test server with dataloader's tables
as assumed from its README (tests/fixtures/legacy/dataloader.sql) and a row
in every status; the engine is the usual fresh test database.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from support.legacy import checksum, create_legacy_schema

from queue_engine import Client
from queue_engine.operator.importing.run import run_import
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain

QUEUE = "etl.default"


def _uuid(n: int) -> str:
    return str(uuid.UUID(int=n))


#: (n, status, attempt, cancel_requested, available_at offset s, idempotency_key)
ROWS = [
    (1, "queued", 0, False, -5, "cbr_2025-01-10"),
    (2, "queued", 0, False, 7200, None),  # delayed
    (3, "queued", 1, False, -1, None),  # a retry
    (4, "running", 2, False, -30, "load:4"),
    (5, "running", 1, True, -30, None),  # cancel requested: would end canceled
    (6, "queued", 0, True, -30, None),  # cancel requested
    (7, "succeeded", 1, False, -30, None),
    (8, "failed", 3, False, -30, None),
    (9, "canceled", 0, False, -30, None),
    (10, "lost", 1, False, -30, None),
]


@pytest.fixture
def source(empty_dsn: str) -> str:
    create_legacy_schema(empty_dsn, "dataloader")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for n, status, attempt, cancel, offset, key in ROWS:
            conn.execute(
                "INSERT INTO dl_jobs (job_id, queue, task, args, idempotency_key, lock_key,"
                " partition_key, priority, available_at, status, attempt, max_attempts,"
                " lease_ttl_sec, cancel_requested, producer, consumer_group, error)"
                " VALUES (%s, %s, 'load.cbr.rates', %s, %s, %s, %s, %s,"
                " now() + make_interval(secs => %s), %s, %s, 3, 300, %s, 'api-client',"
                " 'cbr-loaders', %s)",
                (
                    _uuid(n),
                    QUEUE,
                    json.dumps({"date": "2025-01-10", "n": n}),
                    key,
                    f"cbr_rates:{n}",
                    "2025-01-10" if n != 3 else "",
                    100 + n,
                    offset,
                    status,
                    attempt,
                    cancel,
                    "timeout" if attempt else None,
                ),
            )
            conn.execute(
                "INSERT INTO dl_job_events (job_id, queue, kind) VALUES (%s, %s, 'created')",
                (_uuid(n), QUEUE),
            )
    return empty_dsn


def _imported(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            "SELECT m.old_id, j.* FROM queue_engine.imported_ids m JOIN queue_engine.jobs j"
            " ON j.id = m.new_id WHERE m.source = 'dataloader' AND m.kind = 'job'"
        ).fetchall()
    return {str(r["old_id"]): r for r in rows}


def test_dataloader_jobs_arrive_with_their_fields_once(source: str, dsn: str) -> None:
    before = checksum(source)
    with psycopg.connect(dsn, autocommit=True) as conn:
        dry = run_import(conn, "queue_engine", "dataloader", source, dry_run=True)
        assert dry.outcomes[("job", "queued", "imported")] == 3
        assert not _imported(conn)
        report = run_import(conn, "queue_engine", "dataloader", source, batch_size=3)
        jobs = _imported(conn)
        assert sorted(jobs) == [_uuid(n) for n in (1, 2, 3, 4)]
        assert report.found[("job", "running (cancel requested)")] == 1
        assert report.found[("job", "lost")] == 1
        one, two, three, four = (jobs[_uuid(n)] for n in (1, 2, 3, 4))
        assert one["queue"] == QUEUE and one["task"] == "load.cbr.rates"
        assert one["args"] == {"date": "2025-01-10", "n": 1}
        assert (one["idempotency_key"], one["lock_key"], one["partition_key"]) == (
            "cbr_2025-01-10",
            "cbr_rates:1",
            "2025-01-10",
        )
        assert (one["priority"], one["max_attempts"], one["lease_ttl_s"], one["producer"]) == (
            101,
            3,
            300,
            "api-client",
        )
        assert two["available_at"] > one["available_at"]  # delayed keeps its time
        assert three["partition_key"] is None and three["attempt"] == 1
        assert (four["status"], four["attempt"], four["error"]) == ("queued", 2, "timeout")

        again = run_import(conn, "queue_engine", "dataloader", source)
        assert len(_imported(conn)) == 4
        assert again.outcomes[("job", "queued", "already imported")] == 3
        count = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
        assert count is not None and count[0] == 4
    assert checksum(source) == before


def test_an_idempotency_key_already_here_maps_to_that_job(source: str, dsn: str) -> None:
    # During the cut-over a client sent the same key to both systems.
    with Client(dsn) as client:
        existing = client.enqueue("load.cbr.rates", queue=QUEUE, idempotency_key="cbr_2025-01-10")
    with psycopg.connect(dsn, autocommit=True) as conn:
        dry = run_import(conn, "queue_engine", "dataloader", source, dry_run=True)
        report = run_import(conn, "queue_engine", "dataloader", source)
        assert _imported(conn)[_uuid(1)]["id"] == existing.id
    matched = ("job", "queued", "matched an existing job by its key")
    assert report.outcomes[matched] == 1
    # The dry run said so beforehand: its counts are the real run's.
    assert dry.outcomes == report.outcomes


def test_imported_dataloader_jobs_run_here(source: str, dsn: str) -> None:
    tasks = TaskRegistry()
    tasks.register(TaskDefinition("load.cbr.rates", lambda args: args["n"], queue=QUEUE))
    with psycopg.connect(dsn, autocommit=True) as conn:
        run_import(conn, "queue_engine", "dataloader", source)
    outcomes = drain(dsn, queue=QUEUE, tasks=tasks, run_delayed=True)
    assert sorted(o.result for o in outcomes) == [1, 2, 3, 4]
    assert {o.status for o in outcomes} == {"succeeded"}
