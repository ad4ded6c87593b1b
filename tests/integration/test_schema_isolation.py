"""Two engines in one database (two schemas) never see each other.

The docs promise that an engine schema is a world of its own: jobs, workers,
NOTIFY channels, leader election, scale slots and lock keys. Lock keys are
session advisory locks, which are database-wide, so their key space must be
derived from the schema: a job with ``lock_key='k'`` running in one schema must
not hold back a ``'k'`` job of the other.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from support.workers import running_worker, wait_until

from queue_engine import Client
from queue_engine.foundation.migrate import Migrator
from queue_engine.worker import store

A, B = "queue_engine", "other_engine"
Q = "wt"


def job_status(conn: psycopg.Connection[Any], schema: str, job_id: int) -> str:
    statement = sql.SQL("SELECT status FROM {}.jobs WHERE id = %s").format(sql.Identifier(schema))
    row = conn.execute(statement, (job_id,)).fetchone()
    assert row is not None
    return str(row[0])


def lock_key_locks(conn: psycopg.Connection[Any]) -> int:
    """Granted one-key (bigint) advisory locks: the lock keys' (no leader runs here)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_running_lock_key_in_one_schema_does_not_block_the_other(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    Migrator(dsn, schema=B).up()
    # Schema A: a job of key 'k' runs (and holds the key's advisory lock) until canceled.
    held = client.enqueue("wait_cancel", queue=Q, args={"max_s": 60}, lock_key="k").id
    with running_worker(dsn, schema=A):
        wait_until(lambda: job_status(conn, A, held) == "running", what="schema A's job running")
        wait_until(lambda: lock_key_locks(conn) == 1, what="schema A's lock key taken")
        # Schema B: its own job of key 'k' runs at once on its own worker.
        with Client(dsn, schema=B) as other, running_worker(dsn, schema=B):
            mine = other.enqueue("echo", queue=Q, args={"x": 1}, lock_key="k").id
            wait_until(
                lambda: job_status(conn, B, mine) == "succeeded",
                timeout=20,
                what="schema B's job of the same lock key finished while A's runs",
            )
        assert job_status(conn, A, held) == "running"
        client.cancel(held)
        wait_until(lambda: job_status(conn, A, held) == "canceled", what="schema A's job canceled")


def test_lock_key_advisory_locks_are_per_schema(dsn: str, conn: psycopg.Connection[Any]) -> None:
    with psycopg.connect(dsn, autocommit=True) as other:
        assert store.try_lock_key(conn, A, "k")
        assert store.try_lock_key(other, B, "k")  # another schema: another key space
        assert not store.try_lock_key(other, A, "k")  # same schema: excluded
        store.unlock_key(conn, A, "k")
        assert store.try_lock_key(other, A, "k")
