"""Contract: the migration runner against a real Postgres.

Up, down and up again leaves an identical catalog; down to 0 keeps only the
ledger; status shows pending and applied steps; partial up/down stop at the
target; two processes migrating at once are safe; a host application's chain
with its own ledger lives beside the engine's without either touching the
other's ledger; malformed chains are refused before anything is applied; a
failing step is rolled back with its ledger row; ``wait_for_schema`` blocks
until the schema is there, or raises ``SchemaMissing`` after its timeout.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from support.ctl import QUEUE_CTL, clean_env, queue_ctl
from support.timing import FakeTiming

from queue_engine.foundation.errors import MigrationError, SchemaMissing
from queue_engine.foundation.migrate import (
    ENGINE_LEDGER_TABLE,
    ENGINE_SCHEMA_VERSION,
    Migrator,
    load_chain,
    wait_for_schema,
)

ENGINE_SCHEMA = "queue_engine"
ENGINE_TABLES = {"jobs", "job_events", "workers", "job_transitions"}


def query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def execute(dsn: str, sql: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)


def relation_exists(dsn: str, name: str) -> bool:
    return query(dsn, "SELECT to_regclass(%s) IS NOT NULL", (name,))[0][0]


def tables_in(dsn: str, schema: str) -> set[str]:
    rows = query(
        dsn,
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
        (schema,),
    )
    return {r[0] for r in rows}


def ledger_rows(dsn: str, ledger: str) -> list[tuple[int, str]]:
    return [
        (int(r[0]), str(r[1]))
        for r in query(dsn, f"SELECT version, name FROM {ledger} ORDER BY version")
    ]


def catalog_snapshot(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Everything a migration defines in ``schema``, without OIDs or timestamps."""
    parts = {
        "tables": """
            SELECT c.relname, c.relkind, coalesce(c.reloptions, '{}')
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
            ORDER BY 1""",
        "columns": """
            SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
                   a.attnotnull, a.attidentity, a.attgenerated,
                   pg_get_expr(d.adbin, d.adrelid)
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE n.nspname = %(s)s AND c.relkind IN ('r', 'p') AND a.attnum > 0
              AND NOT a.attisdropped
            ORDER BY 1, 2""",
        "indexes": """
            SELECT tablename, indexname, indexdef FROM pg_indexes
            WHERE schemaname = %(s)s ORDER BY 1, 2""",
        "constraints": """
            SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid)
            FROM pg_constraint k
            JOIN pg_class c ON c.oid = k.conrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %(s)s ORDER BY 1, 2""",
        "triggers": """
            SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled
            FROM pg_trigger t
            JOIN pg_class c ON c.oid = t.tgrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %(s)s AND NOT t.tgisinternal ORDER BY 1, 2""",
        "functions": """
            SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = %(s)s ORDER BY 1, 2""",
        "transitions": f"""
            SELECT from_status, to_status FROM "{schema}".job_transitions ORDER BY 1, 2""",
    }
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            name: [tuple(r) for r in conn.execute(sql, {"s": schema}).fetchall()]
            for name, sql in parts.items()
        }


def write_chain(folder: Path, steps: dict[str, tuple[str, str]]) -> Path:
    """Write ``{"0001_name": (up_sql, down_sql)}`` as a chain folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, (up, down) in steps.items():
        (folder / f"{stem}.sql").write_text(up, encoding="utf-8")
        (folder / f"{stem}.down.sql").write_text(down, encoding="utf-8")
    return folder


def app_chain(folder: Path) -> Path:
    """A host application's three-step chain in its own schema ``app``."""
    return write_chain(
        folder,
        {
            "0001_widgets": (
                "CREATE SCHEMA IF NOT EXISTS app; CREATE TABLE app.widgets (id int PRIMARY KEY);",
                "DROP TABLE app.widgets;",
            ),
            "0002_gadgets": (
                "CREATE TABLE app.gadgets (id int PRIMARY KEY);",
                "DROP TABLE app.gadgets;",
            ),
            "0003_gizmos": (
                "CREATE TABLE app.gizmos (id int PRIMARY KEY);",
                "DROP TABLE app.gizmos;",
            ),
        },
    )


# --- up / down / up ------------------------------------------------------------------------


def test_up_down_up_leaves_an_identical_catalog(empty_dsn: str) -> None:
    migrator = Migrator(empty_dsn)
    applied = migrator.up()
    assert [m.version for m in applied] == list(range(1, ENGINE_SCHEMA_VERSION + 1))
    first = catalog_snapshot(empty_dsn, ENGINE_SCHEMA)

    # The snapshot really covers the schema (so an empty == empty comparison cannot pass).
    assert {t[0] for t in first["tables"]} >= ENGINE_TABLES | {ENGINE_LEDGER_TABLE}
    assert any(i[1] == "jobs_claimable_idx" for i in first["indexes"])
    assert {t[1] for t in first["triggers"]} >= {"jobs_check_row", "jobs_guard_transition"}
    assert {f[0] for f in first["functions"]} >= {
        "enqueue",
        "jobs_guard_transition",
        "jobs_row_rules",
    }
    assert any(c[2] == "idempotency_key" for c in first["columns"])

    reverted = migrator.down(0)
    assert [m.version for m in reverted] == list(range(ENGINE_SCHEMA_VERSION, 0, -1))
    assert migrator.current_version() == 0

    migrator.up()
    second = catalog_snapshot(empty_dsn, ENGINE_SCHEMA)
    assert second == first
    assert migrator.current_version() == ENGINE_SCHEMA_VERSION


def test_the_last_step_down_restores_the_catalog_of_the_version_before(empty_dsn: str) -> None:
    # A down file must undo its step exactly (a function body, a column
    # default, a grant), not merely leave a schema the runner can go up from.
    migrator = Migrator(empty_dsn)
    migrator.up(ENGINE_SCHEMA_VERSION - 1)
    before = catalog_snapshot(empty_dsn, ENGINE_SCHEMA)
    migrator.up()
    assert catalog_snapshot(empty_dsn, ENGINE_SCHEMA) != before
    assert [m.version for m in migrator.down(ENGINE_SCHEMA_VERSION - 1)] == [ENGINE_SCHEMA_VERSION]
    assert catalog_snapshot(empty_dsn, ENGINE_SCHEMA) == before


def test_fresh_migration_matches_the_test_template(empty_dsn: str, dsn: str) -> None:
    Migrator(empty_dsn).up()
    assert catalog_snapshot(empty_dsn, ENGINE_SCHEMA) == catalog_snapshot(dsn, ENGINE_SCHEMA)


def test_down_to_zero_removes_everything_but_the_ledger(dsn: str) -> None:
    migrator = Migrator(dsn)
    assert tables_in(dsn, ENGINE_SCHEMA) >= ENGINE_TABLES
    migrator.down(0)
    assert tables_in(dsn, ENGINE_SCHEMA) == {ENGINE_LEDGER_TABLE}
    snap = catalog_snapshot_without_transitions(dsn)
    assert snap["functions"] == []
    assert snap["triggers"] == []
    assert {i[0] for i in snap["indexes"]} == {ENGINE_LEDGER_TABLE}
    assert ledger_rows(dsn, f"{ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE}") == []
    assert migrator.current_version() == 0
    # Going down again is a no-op.
    assert migrator.down(0) == []


def catalog_snapshot_without_transitions(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            "functions": conn.execute(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname = %s",
                (ENGINE_SCHEMA,),
            ).fetchall(),
            "triggers": conn.execute(
                "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
                (ENGINE_SCHEMA,),
            ).fetchall(),
            "indexes": conn.execute(
                "SELECT tablename, indexname FROM pg_indexes WHERE schemaname = %s",
                (ENGINE_SCHEMA,),
            ).fetchall(),
        }


def test_up_when_current_is_a_no_op(dsn: str) -> None:
    before = ledger_rows(dsn, f"{ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE}")
    assert Migrator(dsn).up() == []
    assert ledger_rows(dsn, f"{ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE}") == before
    assert before == [(m.version, m.name) for m in Migrator(dsn).chain()]


def test_up_to_date_chain_needs_no_create_privilege(dsn: str, pg_server: Any) -> None:
    # An operator role that may read the ledger but not create anything can still run
    # `migrate` on an up-to-date database: there is nothing to create.
    role = f"qe_reader_{os.getpid()}"
    with pg_server.admin() as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        with psycopg.connect(dsn, autocommit=True) as owner:
            dbname = owner.info.dbname
            owner.execute(f'REVOKE CREATE, TEMPORARY ON DATABASE "{dbname}" FROM PUBLIC')
            owner.execute(f'GRANT USAGE ON SCHEMA {ENGINE_SCHEMA} TO "{role}"')
            owner.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA {ENGINE_SCHEMA} TO "{role}"')
        reader_dsn = make_conninfo(dsn, user=role)
        assert Migrator(reader_dsn).up() == []
        result = queue_ctl("--dsn", reader_dsn, "migrate")
        assert result.returncode == 0, result.stderr
        assert "nothing to do" in result.stdout
    finally:
        with psycopg.connect(dsn, autocommit=True) as owner:
            owner.execute(f'DROP OWNED BY "{role}"')
        with pg_server.admin() as admin:
            admin.execute(f'DROP ROLE "{role}"')


# --- status ----------------------------------------------------------------------------------


def test_status_shows_pending_then_applied(empty_dsn: str) -> None:
    migrator = Migrator(empty_dsn)
    states = migrator.status()
    assert [s.version for s in states] == list(range(1, ENGINE_SCHEMA_VERSION + 1))
    assert all(s.applied_at is None for s in states)
    # Asking for the status changes nothing: no ledger table was created.
    assert not relation_exists(empty_dsn, f"{ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE}")

    migrator.up()
    states = migrator.status()
    assert all(s.applied_at is not None for s in states)
    assert all(s.checksum_matches for s in states)


def test_cli_migrate_status_shows_pending_and_applied(empty_dsn: str) -> None:
    pending = queue_ctl("--dsn", empty_dsn, "migrate", "--status")
    assert pending.returncode == 0, pending.stderr
    assert "0001  initial" in pending.stdout
    assert "pending" in pending.stdout
    assert not relation_exists(empty_dsn, f"{ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE}")

    done = queue_ctl("--dsn", empty_dsn, "migrate")
    assert done.returncode == 0, done.stderr
    assert "applied 0001_initial" in done.stdout
    assert f"database is at version {ENGINE_SCHEMA_VERSION}" in done.stdout

    applied = queue_ctl("--dsn", empty_dsn, "migrate", "--status")
    assert applied.returncode == 0, applied.stderr
    assert "0001  initial" in applied.stdout
    assert "pending" not in applied.stdout

    again = queue_ctl("--dsn", empty_dsn, "migrate")
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout


def test_status_flags_an_edited_migration(empty_dsn: str, tmp_path: Path) -> None:
    folder = app_chain(tmp_path / "chain")
    migrator = Migrator(empty_dsn, directory=folder, ledger="app.app_migrations")
    migrator.up()
    (folder / "0002_gadgets.sql").write_text(
        "CREATE TABLE app.gadgets (id bigint PRIMARY KEY);", encoding="utf-8"
    )
    states = {s.version: s for s in migrator.status()}
    assert states[1].checksum_matches
    assert not states[2].checksum_matches
    out = queue_ctl(
        "--dsn",
        empty_dsn,
        "migrate",
        "--status",
        "--dir",
        str(folder),
        "--ledger",
        "app.app_migrations",
    )
    assert out.returncode == 0, out.stderr
    assert "(file changed since applied)" in out.stdout


def test_status_lists_applied_versions_unknown_to_the_code(empty_dsn: str, tmp_path: Path) -> None:
    folder = app_chain(tmp_path / "chain")
    Migrator(empty_dsn, directory=folder, ledger="app.app_migrations").up()
    (folder / "0003_gizmos.sql").unlink()
    (folder / "0003_gizmos.down.sql").unlink()
    migrator = Migrator(empty_dsn, directory=folder, ledger="app.app_migrations")
    states = migrator.status()
    assert [s.version for s in states] == [1, 2, 3]
    assert states[2].migration is None
    assert "unknown" in states[2].name
    with pytest.raises(MigrationError, match=r"0003.*newer release"):
        migrator.down(0)
    assert ledger_rows(empty_dsn, "app.app_migrations")[-1][0] == 3


# --- partial up / down -------------------------------------------------------------------------


def test_up_and_down_to_a_target(empty_dsn: str, tmp_path: Path) -> None:
    migrator = Migrator(empty_dsn, directory=app_chain(tmp_path / "chain"), ledger="app.app_m")

    assert [m.version for m in migrator.up(2)] == [1, 2]
    assert migrator.current_version() == 2
    assert tables_in(empty_dsn, "app") == {"widgets", "gadgets", "app_m"}

    assert [m.version for m in migrator.up()] == [3]
    assert tables_in(empty_dsn, "app") == {"widgets", "gadgets", "gizmos", "app_m"}

    assert [m.version for m in migrator.down(1)] == [3, 2]
    assert migrator.current_version() == 1
    assert tables_in(empty_dsn, "app") == {"widgets", "app_m"}
    assert ledger_rows(empty_dsn, "app.app_m") == [(1, "widgets")]

    assert migrator.down(1) == []
    assert [m.version for m in migrator.down(0)] == [1]
    assert tables_in(empty_dsn, "app") == {"app_m"}


def test_up_refuses_a_target_beyond_the_chain(empty_dsn: str, tmp_path: Path) -> None:
    migrator = Migrator(empty_dsn, directory=app_chain(tmp_path / "chain"), ledger="app.app_m")
    with pytest.raises(MigrationError, match=r"no migration 4"):
        migrator.up(4)
    with pytest.raises(MigrationError):
        migrator.down(-1)
    assert migrator.current_version() == 0


def test_up_refuses_a_hole_in_the_ledger(empty_dsn: str, tmp_path: Path) -> None:
    migrator = Migrator(empty_dsn, directory=app_chain(tmp_path / "chain"), ledger="app.app_m")
    migrator.up(2)
    execute(empty_dsn, "DELETE FROM app.app_m WHERE version = 1")
    with pytest.raises(MigrationError, match=r"0001 is missing from a database at version 2"):
        migrator.up()
    assert not relation_exists(empty_dsn, "app.gizmos")


def test_cli_upgrade_and_downgrade_to_a_target(empty_dsn: str, tmp_path: Path) -> None:
    folder = str(app_chain(tmp_path / "chain"))
    host = ("--dir", folder, "--ledger", "app.app_m")
    up = queue_ctl("--dsn", empty_dsn, "migrate", "--to", "2", *host)
    assert up.returncode == 0, up.stderr
    assert "database is at version 2" in up.stdout
    down = queue_ctl("--dsn", empty_dsn, "downgrade", "--to", "1", *host)
    assert down.returncode == 0, down.stderr
    assert "reverted 0002_gadgets" in down.stdout
    assert "database is at version 1" in down.stdout
    assert ledger_rows(empty_dsn, "app.app_m") == [(1, "widgets")]


def test_cli_dir_and_ledger_go_together(empty_dsn: str, tmp_path: Path) -> None:
    folder = str(app_chain(tmp_path / "chain"))
    result = queue_ctl("--dsn", empty_dsn, "migrate", "--dir", folder)
    assert result.returncode == 2
    assert result.stderr.startswith("queue-ctl: error:")
    assert "--ledger" in result.stderr
    assert not relation_exists(empty_dsn, "app.widgets")


# --- concurrency -------------------------------------------------------------------------------


def test_two_processes_migrating_at_once(empty_dsn: str) -> None:
    # Hold the runner's lock so both processes are provably in flight at the same time,
    # then let them race.
    gate = psycopg.connect(empty_dsn, autocommit=True)
    gate.execute(
        "SELECT pg_advisory_lock(hashtextextended(%s, 0))", (Migrator(empty_dsn).lock_key,)
    )
    try:
        procs = [
            subprocess.Popen(
                [str(QUEUE_CTL), "--dsn", empty_dsn, "migrate"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=clean_env(),
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + 20
        waiting = 0
        while time.monotonic() < deadline:
            waiting = gate.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                "WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()"
            ).fetchone()[0]
            if waiting == 2 or any(p.poll() is not None for p in procs):
                break
            time.sleep(0.02)
        assert waiting == 2, "both migrate processes should be waiting on the migration lock"
    finally:
        gate.close()
    outputs = [p.communicate(timeout=60) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert f"database is at version {ENGINE_SCHEMA_VERSION}" in out
    # Exactly one of them applied the chain; each version is in the ledger once.
    assert sum("applied 0001_initial" in out for out, _ in outputs) == 1
    rows = query(
        empty_dsn,
        f"SELECT version, count(*) FROM {ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE} GROUP BY version "
        "ORDER BY version",
    )
    assert rows == [(v, 1) for v in range(1, ENGINE_SCHEMA_VERSION + 1)]


# --- a host application's chain ---------------------------------------------------------------


def test_host_chain_and_engine_chain_keep_separate_ledgers(dsn: str, tmp_path: Path) -> None:
    engine_ledger = f"{ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE}"
    engine_before = query(dsn, f"SELECT * FROM {engine_ledger} ORDER BY version")
    folder = str(app_chain(tmp_path / "chain"))

    host = queue_ctl("--dsn", dsn, "migrate", "--dir", folder, "--ledger", "app.app_migrations")
    assert host.returncode == 0, host.stderr
    assert "database is at version 3" in host.stdout
    assert ledger_rows(dsn, "app.app_migrations") == [(1, "widgets"), (2, "gadgets"), (3, "gizmos")]
    assert query(dsn, f"SELECT * FROM {engine_ledger} ORDER BY version") == engine_before

    # The engine's migrate sees its own ledger only (nothing to do) and leaves the app's alone.
    host_before = query(dsn, "SELECT * FROM app.app_migrations ORDER BY version")
    engine = queue_ctl("--dsn", dsn, "migrate")
    assert engine.returncode == 0, engine.stderr
    assert "nothing to do" in engine.stdout
    assert f"database is at version {ENGINE_SCHEMA_VERSION}" in engine.stdout

    # Downgrading the engine to 0 does not touch the host chain.
    Migrator(dsn).down(0)
    assert query(dsn, "SELECT * FROM app.app_migrations ORDER BY version") == host_before
    assert tables_in(dsn, "app") == {"widgets", "gadgets", "gizmos", "app_migrations"}

    # And downgrading the host chain does not touch the engine's ledger.
    Migrator(dsn).up()
    engine_after = query(dsn, f"SELECT version, name FROM {engine_ledger} ORDER BY version")
    host_down = queue_ctl(
        "--dsn", dsn, "downgrade", "--to", "0", "--dir", folder, "--ledger", "app.app_migrations"
    )
    assert host_down.returncode == 0, host_down.stderr
    assert ledger_rows(dsn, "app.app_migrations") == []
    assert tables_in(dsn, "app") == {"app_migrations"}
    assert query(dsn, f"SELECT version, name FROM {engine_ledger} ORDER BY version") == engine_after
    assert tables_in(dsn, ENGINE_SCHEMA) >= ENGINE_TABLES


def test_ledger_without_schema_goes_to_public(empty_dsn: str, tmp_path: Path) -> None:
    folder = write_chain(
        tmp_path / "chain", {"0001_t": ("CREATE TABLE public.t (x int);", "DROP TABLE public.t;")}
    )
    Migrator(empty_dsn, directory=folder, ledger="my_ledger").up()
    assert ledger_rows(empty_dsn, "public.my_ledger") == [(1, "t")]
    assert not relation_exists(empty_dsn, f"{ENGINE_SCHEMA}.{ENGINE_LEDGER_TABLE}")


# --- malformed chains ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "extra", "message"),
    [
        (
            {
                "0001_a": ("CREATE TABLE public.a (x int);", "DROP TABLE public.a;"),
                "0003_c": ("CREATE TABLE public.c (x int);", "DROP TABLE public.c;"),
            },
            None,
            "expected 0002",
        ),
        (
            {"0001_a": ("CREATE TABLE public.a (x int);", "DROP TABLE public.a;")},
            "0002_b.sql",
            "0002_b.down.sql",
        ),
    ],
    ids=["gap", "missing-down"],
)
def test_cli_refuses_a_malformed_chain(
    empty_dsn: str,
    tmp_path: Path,
    steps: dict[str, tuple[str, str]],
    extra: str | None,
    message: str,
) -> None:
    folder = write_chain(tmp_path / "chain", steps)
    if extra:
        (folder / extra).write_text("CREATE TABLE public.b (x int);", encoding="utf-8")
    result = queue_ctl("--dsn", empty_dsn, "migrate", "--dir", str(folder), "--ledger", "app.led")
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("queue-ctl: error:")
    assert message in lines[0]
    assert "Traceback" not in result.stderr
    # Nothing applied, not even the ledger.
    assert not relation_exists(empty_dsn, "public.a")
    assert not relation_exists(empty_dsn, "app.led")


# --- a failing step -----------------------------------------------------------------------------


def test_failing_step_is_rolled_back_with_its_ledger_row(empty_dsn: str, tmp_path: Path) -> None:
    folder = write_chain(
        tmp_path / "chain",
        {
            "0001_ok": ("CREATE TABLE public.ok (x int);", "DROP TABLE public.ok;"),
            "0002_broken": (
                "CREATE TABLE public.half (x int); INSERT INTO public.ok VALUES (1); SELECT 1/0;",
                "DROP TABLE public.half;",
            ),
            "0003_never": ("CREATE TABLE public.never (x int);", "DROP TABLE public.never;"),
        },
    )
    migrator = Migrator(empty_dsn, directory=folder, ledger="app.led")
    with pytest.raises(MigrationError, match=r"0002_broken \(up\) failed and was rolled back"):
        migrator.up()
    assert ledger_rows(empty_dsn, "app.led") == [(1, "ok")]
    assert relation_exists(empty_dsn, "public.ok")
    assert not relation_exists(empty_dsn, "public.half")
    assert not relation_exists(empty_dsn, "public.never")
    assert query(empty_dsn, "SELECT count(*) FROM public.ok") == [(0,)]
    assert migrator.current_version() == 1

    # The CLI reports it as one line with a non-zero exit.
    result = queue_ctl("--dsn", empty_dsn, "migrate", "--dir", str(folder), "--ledger", "app.led")
    assert result.returncode != 0
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "0002_broken" in result.stderr
    assert "Traceback" not in result.stderr
    assert ledger_rows(empty_dsn, "app.led") == [(1, "ok")]


def test_failing_down_step_keeps_its_ledger_row(empty_dsn: str, tmp_path: Path) -> None:
    folder = write_chain(
        tmp_path / "chain",
        {
            "0001_ok": ("CREATE TABLE public.ok (x int);", "DROP TABLE public.ok;"),
            "0002_t": ("CREATE TABLE public.t (x int);", "DROP TABLE public.t; SELECT 1/0;"),
        },
    )
    migrator = Migrator(empty_dsn, directory=folder, ledger="app.led")
    migrator.up()
    with pytest.raises(MigrationError, match=r"\(down\) failed"):
        migrator.down(0)
    assert ledger_rows(empty_dsn, "app.led") == [(1, "ok"), (2, "t")]
    assert relation_exists(empty_dsn, "public.t")
    assert relation_exists(empty_dsn, "public.ok")


def test_migration_lock_is_released_after_a_failure(empty_dsn: str, tmp_path: Path) -> None:
    folder = write_chain(tmp_path / "chain", {"0001_bad": ("SELECT 1/0;", "SELECT 1;")})
    migrator = Migrator(empty_dsn, directory=folder, ledger="app.led")
    with pytest.raises(MigrationError):
        migrator.up()
    # A second run is not blocked by a lock left behind (it fails the same way, quickly).
    with pytest.raises(MigrationError):
        migrator.up()
    assert load_chain(folder)[0].version == 1


# --- wait_for_schema -----------------------------------------------------------------------


def test_wait_for_schema_returns_at_once_when_migrated(dsn: str) -> None:
    def no_sleep(_: float) -> None:
        raise AssertionError("wait_for_schema slept on a migrated database")

    assert wait_for_schema(dsn, sleep=no_sleep, timeout_s=0) == ENGINE_SCHEMA_VERSION
    assert wait_for_schema(dsn, min_version=1, sleep=no_sleep) >= 1


def test_wait_for_schema_times_out_on_an_empty_database(empty_dsn: str) -> None:
    fake = FakeTiming()
    with pytest.raises(SchemaMissing, match=r"version 0.*queue-ctl migrate"):
        wait_for_schema(empty_dsn, timeout_s=5, poll_s=1, sleep=fake.sleep, clock=fake.clock)
    assert 5 <= sum(fake.sleeps) <= 6


def test_a_short_wait_for_the_schema_is_info_and_a_long_one_a_warning(
    empty_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeTiming()
    caplog.set_level(logging.INFO, logger="queue_engine.migrate")
    with pytest.raises(SchemaMissing):
        wait_for_schema(empty_dsn, timeout_s=9, poll_s=1, sleep=fake.sleep, clock=fake.clock)
    waits = [r for r in caplog.records if "waiting for schema" in r.getMessage()]
    assert [r.levelno for r in waits] == [logging.INFO]
    caplog.clear()
    with pytest.raises(SchemaMissing):
        wait_for_schema(empty_dsn, timeout_s=30, poll_s=1, sleep=fake.sleep, clock=fake.clock)
    waits = [r for r in caplog.records if "waiting for schema" in r.getMessage()]
    assert [r.levelno for r in waits] == [logging.INFO, logging.WARNING]


def test_wait_for_schema_needs_the_requested_version(dsn: str) -> None:
    fake = FakeTiming()
    with pytest.raises(SchemaMissing, match=rf"version {ENGINE_SCHEMA_VERSION}"):
        wait_for_schema(
            dsn,
            min_version=ENGINE_SCHEMA_VERSION + 1,
            timeout_s=2,
            poll_s=1,
            sleep=fake.sleep,
            clock=fake.clock,
        )
    assert 2 <= sum(fake.sleeps) <= 3


def test_wait_for_schema_waits_for_an_unreachable_database() -> None:
    fake = FakeTiming()
    with pytest.raises(SchemaMissing) as info:
        wait_for_schema(
            "postgresql://u:s3cretpw@127.0.0.1:1/x",
            timeout_s=3,
            poll_s=1,
            sleep=fake.sleep,
            clock=fake.clock,
        )
    assert 3 <= sum(fake.sleeps) <= 4
    assert "s3cretpw" not in str(info.value)


def test_wait_for_schema_in_a_custom_schema_ignores_the_default_one(dsn: str) -> None:
    fake = FakeTiming()
    with pytest.raises(SchemaMissing, match=r"'elsewhere'"):
        wait_for_schema(
            dsn, schema="elsewhere", timeout_s=1, poll_s=1, sleep=fake.sleep, clock=fake.clock
        )


def test_wait_for_schema_returns_once_another_thread_migrates(empty_dsn: str) -> None:
    polled = threading.Event()
    result: dict[str, Any] = {}

    def recording_sleep(seconds: float) -> None:
        polled.set()
        threading.Event().wait(seconds)

    def waiter() -> None:
        try:
            result["version"] = wait_for_schema(
                empty_dsn, timeout_s=30, poll_s=0.05, sleep=recording_sleep
            )
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    assert polled.wait(10), "the waiter never polled"
    assert thread.is_alive()
    Migrator(empty_dsn).up()
    thread.join(10)
    assert not thread.is_alive()
    assert result == {"version": ENGINE_SCHEMA_VERSION}
