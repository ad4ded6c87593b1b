"""Contract of ``queue-orchestrator`` start-up and exit codes.

Two orchestrators started at once on an empty database both come up: the
migrations are applied exactly once (the migrator's advisory lock makes the
second wait, then find nothing to do), exactly one of them leads, and both
stop with exit 0 on SIGTERM. A first start logs one line about the migrations
at info (``orchestrator.schema_migrated``), not one or two per migration. A
database that cannot be reached at start gives one error line and exit code 69.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import psycopg
from support.orchestrators import BIN, count_in, role_of, spawn, stop, wait_for

from queue_engine.foundation.migrate import Migrator


def test_two_orchestrators_starting_at_once_on_an_empty_database(
    empty_dsn: str, tmp_path: Path
) -> None:
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [spawn(empty_dsn, log) for log in logs]
    try:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:

            def roles() -> list[str | None] | None:
                try:
                    found = [role_of(conn, p.pid) for p in procs]
                except psycopg.errors.UndefinedTable:
                    return None  # not migrated yet
                # Both register as standby first; one then wins the election.
                return found if sorted(r or "" for r in found) == ["leader", "standby"] else None

            found = wait_for("both orchestrators to register", roles, procs)
        assert sorted(found) == ["leader", "standby"]
        head = Migrator(empty_dsn).chain()[-1]
        assert Migrator(empty_dsn).current_version() == head.version
        for migration in Migrator(empty_dsn).chain():
            line = f"orchestrator.migrated version={migration.version} "
            assert sum(count_in(log, line) for log in logs) == 1, migration
        # and the one that applied them said so in one line; the other applied nothing
        assert sum(count_in(log, "orchestrator.schema_migrated ") for log in logs) == 1
        for p in procs:
            p.send_signal(signal.SIGTERM)
        assert [p.wait(timeout=30) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)


def test_first_start_logs_one_migration_line_at_info(empty_dsn: str, tmp_path: Path) -> None:
    """An empty database: the whole chain is applied and said in one info line (it was 54)."""
    log = tmp_path / "orchestrator.log"
    proc = spawn(empty_dsn, log, log_level="INFO")
    try:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:

            def registered() -> bool:
                try:
                    return role_of(conn, proc.pid) is not None
                except psycopg.errors.UndefinedTable:
                    return False  # not migrated yet

            wait_for("the orchestrator to register", registered, [proc])
        assert stop(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    head = Migrator(empty_dsn).chain()[-1].version
    lines = [line for line in log.read_text().splitlines() if "migrat" in line.lower()]
    assert len(lines) == 1, "\n".join(lines[:5])
    assert " INFO " in lines[0]
    assert (
        f"orchestrator.schema_migrated version={head} applied={head} schema=queue_engine"
        in (lines[0])
    )


def test_unreachable_database_at_start_exits_69_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            str(BIN / "queue-orchestrator"),
            "--dsn",
            f"postgresql://postgres@/postgres?host={tmp_path}&port=1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"QUEUE_ENGINE_CONNECT_RETRY_S": "0", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 69
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert errors[0].startswith("queue-orchestrator: error: cannot connect to the database at ")
