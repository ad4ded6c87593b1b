"""The harness itself: each test database is a fresh, migrated copy."""

from __future__ import annotations

from queue_engine import Client
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, Migrator
from queue_engine.testing import enqueued_jobs


def test_test_database_is_migrated_and_empty(dsn: str, client: Client) -> None:
    assert Migrator(dsn).current_version() == ENGINE_SCHEMA_VERSION
    assert enqueued_jobs(client, status=None) == []


def test_databases_are_isolated_between_tests_a(client: Client) -> None:
    client.enqueue("isolation.a")
    assert [j.task for j in enqueued_jobs(client, status=None)] == ["isolation.a"]


def test_databases_are_isolated_between_tests_b(client: Client) -> None:
    client.enqueue("isolation.b")
    assert [j.task for j in enqueued_jobs(client, status=None)] == ["isolation.b"]
