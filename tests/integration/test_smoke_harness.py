"""The harness itself: each test database is a fresh, migrated copy."""

from __future__ import annotations

from queue_engine import Client
from queue_engine.migrate import ENGINE_SCHEMA_VERSION, Migrator


def test_test_database_is_migrated_and_empty(dsn: str, conn) -> None:
    assert Migrator(dsn).current_version() == ENGINE_SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == 0


def test_databases_are_isolated_between_tests_a(client: Client, conn) -> None:
    client.enqueue("isolation.a")
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == 1


def test_databases_are_isolated_between_tests_b(client: Client, conn) -> None:
    client.enqueue("isolation.b")
    assert conn.execute("SELECT task FROM queue_engine.jobs").fetchall() == [("isolation.b",)]
