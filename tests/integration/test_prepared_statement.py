"""The worker's finish-and-claim statement without a cursor: the same rows, errors and recovery."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors

from queue_engine.foundation.db import CursorKeepingConnection, connect
from queue_engine.foundation.sql.compiler import RawStatement
from queue_engine.worker import prepared, store

TYPES = """
SELECT $1::bigint AS id, $2::text AS name, $3::float8 AS f, '{"a": [1]}'::jsonb AS j,
       '{"b": 2}'::json AS js, now() AS ts, NULL::int AS nothing, true AS yes, 7::smallint AS s
"""


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    c = connect(dsn, connection_class=CursorKeepingConnection)
    store.configure_session(c, synchronous_commit="off")
    yield c
    c.close()


def test_rows_are_those_of_the_cursor(conn: psycopg.Connection[Any]) -> None:
    text = TYPES.strip()
    values = [42, "wörker", 2.5]
    expected = psycopg.RawCursor(conn).execute(text, values, prepare=True).fetchall()
    got = prepared.fetch_rows(conn, text, values)
    assert [row[:5] + row[6:] for row in got] == [row[:5] + row[6:] for row in expected]
    assert got[0][3] == {"a": [1]} and got[0][4] == {"b": 2}
    assert got[0][5].tzinfo is not None
    assert prepared.fetch_rows(conn, "SELECT 1 WHERE $1::int > 1", [1]) == []


def test_each_text_is_prepared_once_per_connection(conn: psycopg.Connection[Any], dsn: str) -> None:
    for i in range(3):
        assert prepared.fetch_rows(conn, "SELECT $1::int + 1", [i]) == [(i + 1,)]
    names = conn.execute(
        "SELECT name FROM pg_prepared_statements WHERE name LIKE 'qe_fc_%'"
    ).fetchall()
    assert len(names) == 1
    # Another connection prepares its own.
    with connect(dsn) as other:
        assert prepared.fetch_rows(other, "SELECT $1::int + 1", [5]) == [(6,)]


def test_the_server_infers_each_parameters_type(conn: psycopg.Connection[Any]) -> None:
    # No type is sent: the statement's context decides, whatever the value.
    text = "SELECT g FROM generate_series(1, 10) g WHERE g > $1 ORDER BY g LIMIT $2"
    assert prepared.fetch_rows(conn, text, [5, 2]) == [(6,), (7,)]
    assert prepared.fetch_rows(conn, text, [0, 100_000]) == [(i,) for i in range(1, 11)]
    assert prepared.fetch_rows(conn, "SELECT $1::int IS NULL", [None]) == [(True,)]


def test_a_statement_the_server_dropped_is_prepared_again(conn: psycopg.Connection[Any]) -> None:
    assert prepared.fetch_rows(conn, "SELECT $1::text", ["a"]) == [("a",)]
    conn.execute("DEALLOCATE ALL")
    assert prepared.fetch_rows(conn, "SELECT $1::text", ["b"]) == [("b",)]


def test_a_result_type_changed_by_ddl_is_prepared_again(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE prep_t (a int)")
    conn.execute("INSERT INTO prep_t VALUES (1)")
    text = "SELECT * FROM prep_t WHERE a = $1::int"
    assert prepared.fetch_rows(conn, text, [1]) == [(1,)]
    conn.execute("ALTER TABLE prep_t ADD COLUMN b text DEFAULT 'x'")
    # The old plan's result type no longer matches ("cached plan must not change result type").
    assert prepared.fetch_rows(conn, text, [1]) == [(1, "x")]


def test_errors_are_psycopgs_and_leave_the_connection_usable(
    conn: psycopg.Connection[Any],
) -> None:
    conn.execute("CREATE TABLE prep_u (k int PRIMARY KEY)")
    text = "INSERT INTO prep_u VALUES ($1::int) RETURNING k"
    assert prepared.fetch_rows(conn, text, [1]) == [(1,)]
    with pytest.raises(errors.UniqueViolation):
        prepared.fetch_rows(conn, text, [1])
    with pytest.raises(errors.UndefinedTable):
        prepared.fetch_rows(conn, "SELECT * FROM no_such_table WHERE $1::int = 1", [1])
    assert prepared.fetch_rows(conn, text, [2]) == [(2,)]
    assert conn.execute("SELECT count(*) FROM prep_u").fetchone() == (2,)


def test_a_lost_connection_raises_operational_error(
    conn: psycopg.Connection[Any], dsn: str
) -> None:
    assert prepared.fetch_rows(conn, "SELECT $1::int", [1]) == [(1,)]
    pid = conn.info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(psycopg.OperationalError):
        prepared.fetch_rows(conn, "SELECT $1::int", [1])


def test_a_transaction_of_the_callers_is_left_to_the_cursor(dsn: str) -> None:
    statement = RawStatement("SELECT $1::int", ("n",))
    with psycopg.connect(dsn) as conn:  # not autocommit
        with pytest.raises(errors.ProgrammingError, match="autocommit"):
            prepared.fetch_rows(conn, statement.text, [1])
        conn.rollback()
        assert store.raw_rows(conn, statement, {"n": 1}) == [(1,)]
        # psycopg opened a transaction for it, as the worker's statement in a test's
        # own transaction expects: it stays open until the caller ends it.
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
