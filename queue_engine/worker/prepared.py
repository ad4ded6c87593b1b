"""The worker's finish-and-claim statement through libpq's prepared-statement calls, not a cursor.

Why: a one-at-a-time worker sends this statement once per job, and on a
2-core machine its throughput is one over the CPU the worker and the server
spend per job. psycopg's cursor does, for every execute, what this statement
needs once: it converts the query, looks it up in the connection's
prepared-statement cache, dumps each parameter through the adapters (and
picks its type by its value), and builds a cursor's result state. Measured
(bench/runs/2026-11-27-log.md, "The statement without a cursor"): 52 us of the worker's
CPU per statement through a kept ``RawCursor``, 38 us this way, with the
same rows.

What this keeps of psycopg: the connection (its socket, lock and wait
function, its notifications), the generator that sends and reads, the error
classes, and the row loaders of the connection (the worker's JSON loads, the
session's time zone). What it does itself:

- each statement text is prepared once per connection, under a name of its
  own (``qe_fc_<n>``), with every parameter's type left to the server: the
  statement casts what needs casting, so a value's type cannot change the
  plan from one job to the next (psycopg's int dumper picks ``int2`` or
  ``int4`` by value, and each choice was a statement of its own);
- parameters go as text: ``str`` as is, ``int`` and ``float`` as Python
  writes them, ``None`` as NULL; any other type raises ``TypeError`` (the
  statement's parameters are only these);
- a prepared statement the server no longer has (``DISCARD ALL``,
  ``DEALLOCATE``) or whose result type a schema change altered is prepared
  again under a new name, once, before the error counts.

It needs an autocommit connection (the worker's): each execute is its own
transaction, as through the cursor. It refuses any other, whose caller
expects psycopg to open a transaction first (``store.raw_rows`` sends
through the cursor then).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import adapt, errors, generators, pq

Connection = psycopg.Connection[Any]

#: Names of the statements prepared here, unique in the process.
_names = itertools.count()


class _Session:
    """What one connection has prepared, and its row loaders."""

    __slots__ = ("encoding", "names", "transformer")

    def __init__(self, conn: Connection) -> None:
        self.encoding = conn.info.encoding
        self.names: dict[str, bytes] = {}
        self.transformer = adapt.Transformer(conn)


_SESSIONS: weakref.WeakKeyDictionary[Connection, _Session] = weakref.WeakKeyDictionary()

#: Errors after which a statement is prepared again (once): the server dropped
#: it, or a schema change altered the type of its result.
_PREPARE_AGAIN = (errors.InvalidSqlStatementName, errors.FeatureNotSupported)


def text_params(values: Sequence[Any], encoding: str) -> list[bytes | None]:
    """The parameters as libpq's text values: ``str``, ``int``, ``float`` or ``None`` only."""
    out: list[bytes | None] = []
    for value in values:
        kind = type(value)
        if value is None:
            out.append(None)
        elif kind is str:
            out.append(value.encode(encoding))
        elif kind is int:
            out.append(str(value).encode())
        elif kind is float:
            out.append(repr(value).encode())
        else:
            raise TypeError(
                f"a prepared statement parameter must be str, int, float or None: {value!r}"
            )
    return out


def fetch_rows(conn: Connection, text: str, values: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Run ``text`` (``$n`` placeholders) with ``values`` as a prepared statement; return its rows.

    Raises the error psycopg's cursor would (``psycopg.errors``), and
    ``OperationalError`` when the connection is lost.
    """
    if not conn.autocommit:
        raise errors.ProgrammingError("fetch_rows needs an autocommit connection")
    session = _SESSIONS.get(conn)
    if session is None:
        session = _SESSIONS[conn] = _Session(conn)
    params = text_params(values, session.encoding)
    with conn.lock:
        try:
            return _run(conn, session, text, params)
        except _PREPARE_AGAIN:
            # Dropped by the server or outdated by DDL: a new name, once.
            session.names.pop(text, None)
            return _run(conn, session, text, params)


def _run(
    conn: Connection, session: _Session, text: str, params: list[bytes | None]
) -> list[tuple[Any, ...]]:
    """Prepare ``text`` on this connection if it is not yet, run it, load its rows."""
    name = session.names.get(text)
    if name is None:
        name = b"qe_fc_%d" % next(_names)
        conn.pgconn.send_prepare(name, text.encode(session.encoding))
        _check(conn.wait(generators.execute(conn.pgconn)), session)
        session.names[text] = name
    conn.pgconn.send_query_prepared(name, params)
    results = conn.wait(generators.execute(conn.pgconn))
    _check(results, session)
    result = results[-1]
    if result.status != pq.ExecStatus.TUPLES_OK:
        raise errors.ProgrammingError("the statement returned no rows description")
    loader = session.transformer
    loader.set_pgresult(result)
    return loader.load_rows(0, result.ntuples, tuple)


def _check(results: list[pq.abc.PGresult], session: _Session) -> None:
    """Raise the error of the first failed result (as psycopg's cursor raises it)."""
    if not results:
        raise errors.InternalError("got no result from the statement")
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise errors.error_from_result(result, encoding=session.encoding)
