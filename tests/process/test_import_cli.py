"""``queue-ctl import`` as an operator runs it: the report, the exit codes, one-line errors.

The source DSN is a secret: no output of the command may contain its password,
whatever went wrong.
"""

from __future__ import annotations

import json

import psycopg
from psycopg.conninfo import make_conninfo
from support.ctl import queue_ctl
from support.legacy import create_legacy_schema
from support.ports import free_port as closed_port

SECRET = "s3cr3t-pw-for-import"


def _one_line_error(proc: object, code: int) -> str:
    assert proc.returncode == code, (proc.stdout, proc.stderr)  # type: ignore[attr-defined]
    err: str = proc.stderr  # type: ignore[attr-defined]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and SECRET not in err + proc.stdout  # type: ignore[attr-defined]
    return lines[0]


def test_import_prints_its_report_and_imports_once(dsn: str, empty_dsn: str) -> None:
    create_legacy_schema(empty_dsn, "pqrun")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (job_type, status, priority) VALUES"
            " ('pq.a', 'READY', 5), ('pq.a', 'RUNNING', 0), ('pq.a', 'DONE', 0)"
        )
    dry = queue_ctl(
        "--dsn", dsn, "import", "--from", "pqrun", "--source-dsn", empty_dsn, "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert "dry run, nothing written" in dry.stdout
    assert "job READY: 1 found, 1 would import" in dry.stdout
    assert "clamp(100 - pqrun, 0, 1000)" in dry.stdout
    first = queue_ctl("--dsn", dsn, "import", "--from", "pqrun", "--source-dsn", empty_dsn)
    assert first.returncode == 0, first.stderr
    assert "job RUNNING: 1 found, 1 imported (as queued, attempts counted)" in first.stdout
    assert "job DONE: 1 not moved" in first.stdout
    second = queue_ctl("--dsn", dsn, "import", "--from", "pqrun", "--source-dsn", empty_dsn)
    assert "job READY: 1 found, 0 imported, 1 already imported" in second.stdout
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
    assert row == (2,)


def test_a_source_without_the_tables_exits_2(dsn: str, empty_dsn: str) -> None:
    proc = queue_ctl("--dsn", dsn, "import", "--from", "dataloader", "--source-dsn", empty_dsn)
    line = _one_line_error(proc, 2)
    assert "is not a dataloader database" in line and "dl_jobs" in line


def test_an_unreachable_source_exits_69_without_its_password(dsn: str) -> None:
    down = make_conninfo(dsn, host="127.0.0.1", port=closed_port(), password=SECRET)
    proc = queue_ctl("--dsn", dsn, "import", "--from", "pqrun", "--source-dsn", down)
    assert "cannot connect" in _one_line_error(proc, 69)


def test_a_malformed_source_dsn_exits_2_without_echoing_it(dsn: str) -> None:
    bad = f"postgresql//importer:{SECRET}@nowhere/db"
    proc = queue_ctl("--dsn", dsn, "import", "--from", "pqrun", "--source-dsn", bad)
    assert "invalid DSN" in _one_line_error(proc, 2)


def test_an_unknown_system_or_schema_is_a_usage_error(dsn: str, empty_dsn: str) -> None:
    proc = queue_ctl("--dsn", dsn, "import", "--from", "celery", "--source-dsn", empty_dsn)
    assert proc.returncode == 2 and "celery" in proc.stderr
    proc = queue_ctl(
        "--dsn",
        dsn,
        "import",
        "--from",
        "pqrun",
        "--source-dsn",
        empty_dsn,
        "--source-schema",
        "x; DROP TABLE jobs",
    )
    assert "--source-schema must be a plain identifier" in _one_line_error(proc, 2)


def test_an_engine_database_without_the_schema_exits_3(empty_dsn: str) -> None:
    create_legacy_schema(empty_dsn, "pqrun")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO jobs (job_type) VALUES ('pq.a')")
    proc = queue_ctl("--dsn", empty_dsn, "import", "--from", "pqrun", "--source-dsn", empty_dsn)
    assert "queue-ctl migrate" in _one_line_error(proc, 3)


def test_json_report(dsn: str, empty_dsn: str) -> None:
    create_legacy_schema(empty_dsn, "pqrun")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (job_type, status) VALUES ('pq.a', 'READY'), ('pq.a', 'DONE')"
        )
    proc = queue_ctl("--dsn", dsn, "import", "--from", "pqrun", "--source-dsn", empty_dsn, "--json")
    report = json.loads(proc.stdout)
    assert report["dry_run"] is False and report["batches"] == 1
    assert {"kind": "job", "status": "READY", "outcome": "imported", "count": 1} in report[
        "outcomes"
    ]
