"""Versioned SQL migrations: load a chain, apply it up or down, wait for it.

A chain is a folder of ``NNNN_name.sql`` files, each with ``NNNN_name.down.sql``,
numbered from 1 without gaps. Applied versions are recorded in a ledger table;
each step and its ledger row commit in one transaction, and a whole run holds a
session advisory lock keyed on the ledger, so two processes migrating at once
is safe (the second waits, then finds nothing to do).

The engine's own chain lives in ``migrations/`` (shipped in the wheel as
``queue_engine/migrations``) with its ledger in the engine schema; a host
application can run its own chain, with its own ledger, through the same runner.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from queue_engine.foundation import sql as queries
from queue_engine.foundation import table_statistics
from queue_engine.foundation.config import resolve_schema, validate_schema
from queue_engine.foundation.db import connect, first_line
from queue_engine.foundation.errors import (
    ConfigError,
    DatabaseUnavailable,
    MigrationError,
    SchemaMissing,
)

log = logging.getLogger("queue_engine.migrate")

#: The schema version this code needs; a test checks it is the last migration.
ENGINE_SCHEMA_VERSION = 34
ENGINE_LEDGER_TABLE = "schema_migrations"

MIGRATION_FILE = re.compile(r"^(?P<version>\d{4})_(?P<name>[a-z0-9_]+?)(?P<down>\.down)?\.sql$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of a chain: its up and down scripts."""

    version: int
    name: str
    up_path: Path
    down_path: Path

    @property
    def checksum(self) -> str:
        """SHA-256 of the up script, recorded in the ledger to spot edited migrations."""
        return hashlib.sha256(self.up_path.read_bytes()).hexdigest()

    def script(self, direction: str, schema: str) -> LiteralString:
        """Return the up or down script with the engine schema substituted."""
        path = self.up_path if direction == "up" else self.down_path
        return queries.render(path.read_text(encoding="utf-8"), schema)


@dataclass(frozen=True, slots=True)
class MigrationState:
    """A migration and whether (and when) the database has it."""

    migration: Migration | None
    version: int
    name: str
    applied_at: datetime | None
    checksum_matches: bool


def engine_migrations_dir() -> Path:
    """Find the engine's migrations: inside the installed package, else the source checkout."""
    package_dir = Path(__file__).resolve().parents[1]  # queue_engine/, above this wing
    for candidate in (package_dir / "migrations", package_dir.parent / "migrations"):
        if candidate.is_dir() and any(candidate.glob("0001_*.sql")):
            return candidate
    raise MigrationError(f"cannot find queue-engine's migrations next to {package_dir}")


def load_chain(directory: Path) -> list[Migration]:
    """Read and check a chain: numbered 1..N without gaps, every step with its down file."""
    if not directory.is_dir():
        raise MigrationError(f"migrations folder {directory} does not exist")
    ups: dict[int, tuple[str, Path]] = {}
    downs: dict[int, tuple[str, Path]] = {}
    for path in sorted(directory.glob("*.sql")):
        match = MIGRATION_FILE.match(path.name)
        if match is None:
            raise MigrationError(
                f"{path.name}: migration files must be named NNNN_name.sql and NNNN_name.down.sql"
            )
        version, name = int(match["version"]), match["name"]
        target = downs if match["down"] else ups
        if version in target:
            raise MigrationError(f"two migrations numbered {version:04d} in {directory}")
        target[version] = (name, path)
    if not ups:
        raise MigrationError(f"no migrations in {directory}")
    chain: list[Migration] = []
    for expected, version in enumerate(sorted(ups), start=1):
        if version != expected:
            raise MigrationError(
                f"gap in migration chain {directory}: expected {expected:04d}, found {version:04d}"
            )
        name, up_path = ups[version]
        down = downs.get(version)
        if down is None or down[0] != name:
            raise MigrationError(f"migration {up_path.name} has no {version:04d}_{name}.down.sql")
        chain.append(Migration(version, name, up_path, down[1]))
    orphans = sorted(set(downs) - set(ups))
    if orphans:
        raise MigrationError(f"down migration {downs[orphans[0]][1].name} has no up migration")
    return chain


def parse_ledger(ledger: str) -> tuple[str, str]:
    """Split ``[schema.]table`` and validate both identifiers."""
    parts = ledger.split(".")
    if len(parts) == 1:
        parts = ["public", parts[0]]
    if len(parts) != 2 or not all(IDENTIFIER.match(p) for p in parts):
        raise ConfigError(
            f"invalid ledger table {ledger!r}: use [schema.]table with plain identifiers"
        )
    return parts[0], parts[1]


def _ledger_sql(name: str, ledger: tuple[str, str]) -> sql.Composed:
    return sql.SQL(queries.plain(name)).format(
        ledger=sql.Identifier(*ledger), ledger_schema=sql.Identifier(ledger[0])
    )


class Migrator:
    """Apply or revert one chain against one database, recorded in one ledger."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        directory: Path | None = None,
        ledger: str | None = None,
    ) -> None:
        self.dsn = dsn
        self.schema = resolve_schema(schema)
        self.directory = directory or engine_migrations_dir()
        self.ledger = parse_ledger(ledger) if ledger else (self.schema, ENGINE_LEDGER_TABLE)
        self.lock_key = f"queue_engine.migrate:{self.ledger[0]}.{self.ledger[1]}"

    def chain(self) -> list[Migration]:
        """Return the checked chain of this migrator's folder."""
        return load_chain(self.directory)

    def status(self) -> list[MigrationState]:
        """Return every migration of the chain and of the ledger, with its applied time."""
        chain = self.chain()
        with connect(self.dsn) as conn:
            applied = self._applied(conn, create=False)
        by_version = {m.version: m for m in chain}
        states = [
            MigrationState(
                migration=m,
                version=m.version,
                name=m.name,
                applied_at=applied[m.version][1] if m.version in applied else None,
                checksum_matches=m.version not in applied or applied[m.version][0] == m.checksum,
            )
            for m in chain
        ]
        states.extend(
            MigrationState(None, version, f"(unknown to this code) {info[2]}", info[1], False)
            for version, info in sorted(applied.items())
            if version not in by_version
        )
        return states

    def current_version(self) -> int:
        """Return the highest applied version (0 when nothing is applied)."""
        with connect(self.dsn) as conn:
            return max(self._applied(conn, create=False), default=0)

    def up(self, target: int | None = None, *, analyze: bool = True) -> list[Migration]:
        """Apply every missing step up to ``target`` (default: the last); return those applied.

        When steps were applied to the engine's own chain, the engine's tables are
        then analyzed (``analyze=False`` skips it): a migration may create or
        rewrite a table, and until its first ANALYZE the planner guesses its size
        (docs/operations.md, "Statistics and autovacuum"). A run that applied
        nothing analyzes nothing, so a restart of every daemon costs no ANALYZE.
        """
        chain = self.chain()
        head = chain[-1].version
        target = head if target is None else target
        if not 0 <= target <= head:
            raise MigrationError(f"no migration {target}: this chain goes from 1 to {head}")
        done: list[Migration] = []
        with connect(self.dsn) as conn, self._locked(conn):
            applied = self._applied(conn, create=True)
            current = max(applied, default=0)
            for migration in chain:
                if migration.version in applied or migration.version > target:
                    continue
                if migration.version < current:
                    raise MigrationError(
                        f"migration {migration.version:04d} is missing from a database at version {current}"
                    )
                self._step(conn, migration, "up")
                done.append(migration)
            if done and analyze and self.ledger == (self.schema, ENGINE_LEDGER_TABLE):
                self._analyze(conn)
        return done

    def _analyze(self, conn: psycopg.Connection[Any]) -> None:
        try:
            tables = table_statistics.analyze_schema(conn, self.schema)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"lost the database while analyzing after migrating: {first_line(exc)}"
            ) from None
        log.debug("analyzed %d tables of schema %s", len(tables), self.schema)

    def down(self, target: int) -> list[Migration]:
        """Revert applied steps, newest first, until the database is at ``target``."""
        chain = self.chain()
        if target < 0:
            raise MigrationError(f"cannot downgrade to {target}: versions start at 0")
        by_version = {m.version: m for m in chain}
        done: list[Migration] = []
        with connect(self.dsn) as conn, self._locked(conn):
            applied = self._applied(conn, create=True)
            for version in sorted(applied, reverse=True):
                if version <= target:
                    break
                migration = by_version.get(version)
                if migration is None:
                    raise MigrationError(
                        f"database has migration {version:04d}, which this code does not know: "
                        "downgrade with the newer release"
                    )
                self._step(conn, migration, "down")
                done.append(migration)
        return done

    def _step(self, conn: psycopg.Connection[Any], migration: Migration, direction: str) -> None:
        # Debug: a first start applies every migration of the chain, and the
        # callers say what was done in one line (`queue-ctl migrate` prints its
        # steps, the orchestrator logs orchestrator.schema_migrated).
        log.debug("migration %s %04d_%s", direction, migration.version, migration.name)
        try:
            with conn.transaction():
                conn.execute(migration.script(direction, self.schema))
                if direction == "up":
                    conn.execute(
                        _ledger_sql("ledger_insert", self.ledger),
                        {
                            "version": migration.version,
                            "name": migration.name,
                            "checksum": migration.checksum,
                        },
                    )
                else:
                    conn.execute(
                        _ledger_sql("ledger_delete", self.ledger), {"version": migration.version}
                    )
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(
                f"lost the database during migration: {first_line(exc)}"
            ) from None
        except psycopg.Error as exc:
            raise MigrationError(
                f"migration {migration.version:04d}_{migration.name} ({direction}) failed and was "
                f"rolled back: {first_line(exc)}"
            ) from None

    def _applied(
        self, conn: psycopg.Connection[Any], *, create: bool
    ) -> dict[int, tuple[str, datetime, str]]:
        # Read first and create the ledger only when it is missing: CREATE ... IF NOT EXISTS
        # still needs the CREATE privilege, which a role running an up-to-date chain may lack.
        try:
            with conn.transaction():
                rows = conn.execute(_ledger_sql("ledger_applied", self.ledger)).fetchall()
        except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
            if create:
                conn.execute(_ledger_sql("ledger_create", self.ledger))
            return {}
        return {int(r[0]): (str(r[2]), r[3], str(r[1])) for r in rows}

    class _Lock:
        def __init__(self, conn: psycopg.Connection[Any], key: str) -> None:
            self.conn, self.key = conn, key

        def __enter__(self) -> None:
            self.conn.execute(queries.plain("migrate_lock"), {"key": self.key})

        def __exit__(self, *exc: object) -> None:
            if not self.conn.closed:
                self.conn.execute(queries.plain("migrate_unlock"), {"key": self.key})

    def _locked(self, conn: psycopg.Connection[Any]) -> Migrator._Lock:
        return Migrator._Lock(conn, self.lock_key)


def schema_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """Return the engine schema's applied version (0 when absent)."""
    ledger = (validate_schema(schema), ENGINE_LEDGER_TABLE)
    try:
        with conn.transaction():
            row = conn.execute(_ledger_sql("ledger_version", ledger)).fetchone()
    except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
        return 0
    return int(row[0]) if row else 0


#: A wait for the schema shorter than this is a fleet starting beside its orchestrator
#: (``queue-ctl up``, systemd starting every unit at once): said at info. One that
#: lasts this long is said again at warning: nothing is migrating the database.
SCHEMA_WAIT_WARN_S = 10.0


def wait_for_schema(
    dsn: str,
    min_version: int = ENGINE_SCHEMA_VERSION,
    *,
    schema: str | None = None,
    timeout_s: float | None = None,
    poll_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Block until the engine schema is at ``min_version`` or later; return the version found.

    Processes call this at start instead of migrating themselves, so they never
    race the orchestrator's migrations. A database that cannot be reached yet is
    waited for too; ``timeout_s`` bounds the wait (None: forever). The wait is
    logged once at info, and once more at warning when it lasts
    :data:`SCHEMA_WAIT_WARN_S`.
    """
    schema = resolve_schema(schema)
    began = clock()
    deadline = None if timeout_s is None else began + timeout_s
    said = logging.NOTSET
    while True:
        version = 0
        reason = ""
        try:
            with connect(dsn) as conn:
                version = schema_version(conn, schema)
        except DatabaseUnavailable as exc:
            reason = str(exc)
        if version >= min_version:
            return version
        level = logging.WARNING if clock() - began >= SCHEMA_WAIT_WARN_S else logging.INFO
        if level > said:
            log.log(
                level,
                "waiting for schema %r version %d (found %d%s): run queue-orchestrator or `queue-ctl migrate`",
                schema,
                min_version,
                version,
                f"; {reason}" if reason else "",
            )
            said = level
        if deadline is not None and clock() >= deadline:
            raise SchemaMissing(
                f"schema {schema!r} is at version {version}, this code needs {min_version}: "
                "run `queue-ctl migrate`"
            )
        sleep(poll_s)
