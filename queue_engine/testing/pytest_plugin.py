"""pytest fixtures for applications built on queue-engine (opt-in).

Enable it with ``pytest -p queue_engine.testing.pytest_plugin`` or, in the
root ``conftest.py``, ``pytest_plugins = ["queue_engine.testing.pytest_plugin"]``.
It is not registered as an automatic ``pytest11`` entry point on purpose: an
installed package should not start a Postgres server, or add fixtures, in
every project that happens to share the environment.

Fixtures:

- ``qe_dsn`` (session): the admin DSN of the session's server, an embedded
  Postgres started once, or ``QUEUE_ENGINE_TEST_DSN``;
- ``qe_template`` (session): the name of the database the engine schema was
  migrated into once;
- ``qe_database``: the DSN of a fresh copy of it for this test, dropped after;
- ``qe_client``: a :class:`~queue_engine.Client` on that database;
- ``qe_async_client``: an :class:`~queue_engine.AsyncClient` on it, an async
  fixture: it needs an async test runner (``@pytest.mark.anyio`` with the
  ``anyio`` plugin, or ``pytest-asyncio``), which opens and closes its pool
  in the test's own event loop;
- ``qe_clock``: a :class:`~queue_engine.testing.TestClock` at the real
  current time, for ``tick`` and ``drain(at=...)``;
- ``qe_environ``: ``QUEUE_ENGINE_DSN`` pointed at that database for the test,
  so the application's own code (which reads its settings) uses it too.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest

from queue_engine.producer.async_client import AsyncClient
from queue_engine.producer.client import Client
from queue_engine.testing.clock import TestClock
from queue_engine.testing.databases import TestServer


@pytest.fixture(scope="session")
def qe_server() -> Iterator[TestServer]:
    """The session's Postgres server (embedded, or ``QUEUE_ENGINE_TEST_DSN``)."""
    server = TestServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def qe_dsn(qe_server: TestServer) -> str:
    """The admin DSN of the session's server."""
    return qe_server.admin_dsn


@pytest.fixture(scope="session")
def qe_template(qe_server: TestServer) -> Iterator[str]:
    """A database with the engine schema migrated once: the template of every test's database."""
    # One per process: parallel sessions (pytest-xdist) on one server do not share it.
    name = qe_server.create_template(name=f"qe_kit_template_{os.getpid()}")
    yield name
    qe_server.drop(name)


@pytest.fixture
def qe_database(qe_server: TestServer, qe_template: str) -> Iterator[str]:
    """The DSN of a fresh, migrated engine database of this test's own."""
    name = qe_server.clone(qe_template, prefix="qe_kit")
    yield qe_server.dsn_for(name)
    qe_server.drop(name)


@pytest.fixture
def qe_client(qe_database: str) -> Iterator[Client]:
    """A Client (with its own small pool) on the test's database."""
    with Client(qe_database) as client:
        yield client


@pytest.fixture
async def qe_async_client(qe_database: str) -> AsyncIterator[AsyncClient]:
    """An AsyncClient on the test's database (its pool lives in the test's event loop)."""
    async with AsyncClient(qe_database) as client:
        yield client


@pytest.fixture
def qe_clock() -> TestClock:
    """A clock at the real current time that moves only when the test says so."""
    return TestClock()


@pytest.fixture
def qe_environ(qe_database: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point ``QUEUE_ENGINE_DSN`` at the test's database; return its DSN."""
    monkeypatch.setenv("QUEUE_ENGINE_DSN", qe_database)
    return qe_database
