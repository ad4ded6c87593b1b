"""Opening connections and turning driver errors into queue-engine errors.

Every process connects through :func:`connect` so that an unreachable database
is reported the same way everywhere (one line, no password, exit code 69), and
so that a missing schema is reported as "run queue-ctl migrate" rather than as
an ``UndefinedTable`` traceback.

It also says which errors mean "this session is no use, open another"
(:data:`RECONNECT_ERRORS`). A lost connection is one; a session on a server
that refuses writes is the other: a standby, a primary still in recovery, or
a primary fenced with ``default_transaction_read_only`` during a switchover.
A daemon's work is writes, so retrying on that session only repeats the
error; dropping it and connecting again lets a multi-host DSN with
``target_session_attrs=read-write`` find the server that is primary now.
:class:`LazyConnection` is that policy for a daemon's long-lived session.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row

from queue_engine.foundation.errors import ConfigError, DatabaseUnavailable, SchemaMissing

APPLICATION_NAME = "queue-engine"


def describe_dsn(dsn: str) -> str:
    """Return ``host/dbname`` for messages; never the password or the full DSN."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(unparsable DSN)"
    host = str(params.get("host") or "local socket")
    port = params.get("port")
    dbname = str(params.get("dbname") or params.get("user") or "default database")
    return f"{host}{':' + str(port) if port else ''}/{dbname}"


def first_line(exc: BaseException) -> str:
    """Return the first non-empty line of an exception message."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


class CursorKeepingConnection(psycopg.Connection[Any]):
    """A connection that keeps its cursors for the statements it runs again and again.

    A new cursor builds its adapters map and a loader per result column on
    every statement: about 23 us for the worker's 19-column finish-and-claim
    (a tenth of the worker's own CPU per job), about 18 us for a producer's
    single enqueue. A kept cursor reuses its loaders. Each user reads a
    statement's rows before the next one runs on the connection (the worker
    under its connection lock, a client while it holds the pooled
    connection), so sharing one is safe; a closed cursor is replaced.
    """

    _kept_raw: psycopg.RawCursor[Any] | None = None
    _kept_tuple: psycopg.Cursor[tuple[Any, ...]] | None = None

    def raw_cursor(self) -> psycopg.RawCursor[Any]:
        """The kept raw cursor (``$n`` placeholders), made on first use."""
        cursor = self._kept_raw
        if cursor is None or cursor.closed:
            cursor = self._kept_raw = psycopg.RawCursor(self)
        return cursor

    def tuple_cursor(self) -> psycopg.Cursor[tuple[Any, ...]]:
        """The kept cursor with ``%(name)s`` placeholders and tuple rows, made on first use."""
        cursor = self._kept_tuple
        if cursor is None or cursor.closed:
            cursor = self._kept_tuple = self.cursor(row_factory=tuple_row)
        return cursor


class AsyncCursorKeepingConnection(psycopg.AsyncConnection[Any]):
    """:class:`CursorKeepingConnection` for asyncio: the ``AsyncClient``'s pooled sessions."""

    _kept_tuple: psycopg.AsyncCursor[tuple[Any, ...]] | None = None

    def tuple_cursor(self) -> psycopg.AsyncCursor[tuple[Any, ...]]:
        """The kept cursor with ``%(name)s`` placeholders and tuple rows, made on first use."""
        cursor = self._kept_tuple
        if cursor is None or cursor.closed:
            cursor = self._kept_tuple = self.cursor(row_factory=tuple_row)
        return cursor


def raw_cursor(conn: psycopg.Connection[Any]) -> psycopg.RawCursor[Any]:
    """The connection's kept raw cursor, or a new one on a connection that keeps none."""
    if isinstance(conn, CursorKeepingConnection):
        return conn.raw_cursor()
    return psycopg.RawCursor(conn)


def tuple_cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[tuple[Any, ...]]:
    """The connection's kept tuple-row cursor, or a new one (whatever the connection's row factory)."""
    if isinstance(conn, CursorKeepingConnection):
        return conn.tuple_cursor()
    return conn.cursor(row_factory=tuple_row)


def async_tuple_cursor(
    conn: psycopg.AsyncConnection[Any],
) -> psycopg.AsyncCursor[tuple[Any, ...]]:
    """:func:`tuple_cursor` for asyncio: the connection's kept cursor, or a new one."""
    if isinstance(conn, AsyncCursorKeepingConnection):
        return conn.tuple_cursor()
    return conn.cursor(row_factory=tuple_row)


#: Seconds a connection attempt may take when the user's DSN and environment
#: say nothing: libpq's own default is to wait as long as the network does.
DEFAULT_CONNECT_TIMEOUT_S = 10


def with_default_timeout(
    dsn: str, kwargs: dict[str, Any], environ: Mapping[str, str] = os.environ
) -> None:
    """Give ``kwargs`` a ``connect_timeout`` of 10 s unless the user chose one.

    A keyword overrides the DSN in libpq, so passing the default always would
    override a DSN's ``connect_timeout`` and ``PGCONNECT_TIMEOUT`` (what
    ``queue-ctl migrate-settings`` writes for dataloader's
    ``PG_CONNECT_TIMEOUT``): the default applies only where neither says. A
    malformed DSN gets the default; the connection then reports it.
    """
    if "connect_timeout" in kwargs or environ.get("PGCONNECT_TIMEOUT"):
        return
    try:
        chosen = "connect_timeout" in conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        chosen = False
    if not chosen:
        kwargs["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT_S


def connect(
    dsn: str,
    *,
    autocommit: bool = True,
    writable: bool = False,
    connection_class: type[psycopg.Connection[Any]] = psycopg.Connection,
    **kwargs: Any,
) -> psycopg.Connection[Any]:
    """Open a connection, raising :class:`DatabaseUnavailable` with a one-line reason.

    ``writable``: refuse a session on a read-only server (see
    :func:`read_only_reason`) as if the database were unreachable, so a daemon
    waits and connects again instead of failing every statement.
    ``connection_class``: for instance :class:`CursorKeepingConnection`.
    """
    kwargs.setdefault("application_name", APPLICATION_NAME)
    with_default_timeout(dsn, kwargs)
    try:
        conn = connection_class.connect(dsn, autocommit=autocommit, **kwargs)
    except psycopg.ProgrammingError as exc:
        raise invalid_dsn(exc) from None
    except psycopg.OperationalError as exc:
        raise unreachable(dsn, exc) from None
    if writable:
        refuse_read_only(conn, dsn)
    return conn


async def connect_async(
    dsn: str, *, autocommit: bool = True, **kwargs: Any
) -> psycopg.AsyncConnection[Any]:
    """Like :func:`connect`, for asyncio."""
    kwargs.setdefault("application_name", APPLICATION_NAME)
    with_default_timeout(dsn, kwargs)
    try:
        return await psycopg.AsyncConnection.connect(dsn, autocommit=autocommit, **kwargs)
    except psycopg.ProgrammingError as exc:
        raise invalid_dsn(exc) from None
    except psycopg.OperationalError as exc:
        raise unreachable(dsn, exc) from None


def invalid_dsn(exc: psycopg.Error) -> ConfigError:
    """A malformed DSN is a configuration error (exit 2), not an unreachable database.

    The driver's message quotes the offending part of the string, which may be
    the password, so it is not repeated.
    """
    return ConfigError("invalid DSN: not a libpq connection string or postgresql:// URI")


def unreachable(dsn: str, exc: psycopg.Error) -> DatabaseUnavailable:
    """The database did not answer; the message names host and database, never the password."""
    return DatabaseUnavailable(
        f"cannot connect to the database at {describe_dsn(dsn)}: {first_line(exc)}"
    )


def read_only(dsn: str, reason: str) -> DatabaseUnavailable:
    """A server that refuses writes is, for a daemon, not the database it needs."""
    return DatabaseUnavailable(
        f"the database at {describe_dsn(dsn)} refuses writes ({reason}): list every host "
        "in the DSN with target_session_attrs=read-write so the primary is chosen"
    )


def refuse_read_only(conn: psycopg.Connection[Any], dsn: str) -> None:
    """Close ``conn`` and raise :class:`DatabaseUnavailable` if its server refuses writes."""
    reason = read_only_reason(conn)
    if reason is not None:
        conn.close()
        raise read_only(dsn, reason)


def read_only_reason(conn: psycopg.Connection[Any]) -> str | None:
    """Why the session's server refuses writes, or None when it accepts them.

    Read from the parameters the server reports by itself (PostgreSQL 14+
    reports ``in_hot_standby`` and ``default_transaction_read_only``, and
    reports them again when they change: at promotion, or when a primary is
    fenced with a configuration reload), so checking costs no round trip.
    An older server reports neither, and the session counts as writable; a
    write then fails with :data:`READ_ONLY_STATE`, one of the
    :data:`RECONNECT_ERRORS`.
    """
    if conn.closed:
        return None
    if conn.info.parameter_status("in_hot_standby") == "on":
        return "it is a standby in recovery"
    if conn.info.parameter_status("default_transaction_read_only") == "on":
        return "default_transaction_read_only is on"
    return None


#: SQLSTATE of "cannot execute ... in a read-only transaction / during recovery".
READ_ONLY_STATE = "25006"

#: Errors after which a daemon drops its session and connects again: the
#: connection is lost (``OperationalError``; deadlocks and serialization
#: failures are in that class too, and a fresh session does them no harm), or
#: the server refuses writes (``ReadOnlySqlTransaction``, :data:`READ_ONLY_STATE`).
RECONNECT_ERRORS: tuple[type[psycopg.Error], ...] = (
    psycopg.OperationalError,
    pg_errors.ReadOnlySqlTransaction,
)

#: :data:`RECONNECT_ERRORS`, plus the connect itself failing (unreachable, or
#: refused as read-only by ``connect(..., writable=True)``).
RECONNECT_OR_UNREACHABLE: tuple[type[Exception], ...] = (*RECONNECT_ERRORS, DatabaseUnavailable)


SCHEMA_ERRORS = (
    pg_errors.UndefinedTable,
    pg_errors.UndefinedFunction,
    pg_errors.UndefinedColumn,
    pg_errors.InvalidSchemaName,
)


class SchemaErrors:
    """``with``: report a missing or outdated engine schema as :class:`SchemaMissing`.

    And a lost connection as :class:`DatabaseUnavailable`. A class rather than
    a generator-based context manager: it is entered on every client call, a
    single enqueue's included, and costs a third as much.
    """

    __slots__ = ("schema",)

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is None:
            return
        if isinstance(exc, SCHEMA_ERRORS):
            raise SchemaMissing(
                f"the queue-engine schema {self.schema!r} is missing or out of date "
                f"({first_line(exc)}): run `queue-ctl migrate`"
            ) from None
        if isinstance(exc, psycopg.OperationalError) and is_connection_error(exc):
            raise DatabaseUnavailable(f"lost the database connection: {first_line(exc)}") from None


def schema_errors(schema: str) -> SchemaErrors:
    """``with schema_errors(schema):`` around statements on the engine's tables."""
    return SchemaErrors(schema)


#: SQLSTATEs that mean the session is gone: class 08 (connection exception),
#: and the server shutting down or restarting (57P01-57P03).
_SESSION_GONE_STATES = ("57P01", "57P02", "57P03")


def is_connection_error(exc: psycopg.Error) -> bool:
    """True when the error means the connection is lost, not that a statement failed.

    Deadlocks and serialization failures are ``OperationalError`` too, but the
    connection is fine and the transaction can simply be retried.
    """
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _SESSION_GONE_STATES


#: libpq TCP keepalives for a daemon's long-lived connections: a half-open
#: connection (peer gone without a FIN, e.g. a network partition) is noticed in
#: about 20 s instead of the operating system's default of hours. Ignored on
#: Unix sockets, where a dead peer is seen at once.
KEEPALIVE_KWARGS: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


class LazyConnection:
    """One autocommit connection, opened on first use and dropped after a connection error.

    A service's run uses it through :meth:`session`; when a statement fails
    because the connection broke or the server refuses writes
    (:data:`RECONNECT_ERRORS`), the session is reset, and the
    next run reconnects. That is the whole reconnect policy: the service's
    error backoff spaces the attempts.

    ``writable`` (the default: every daemon service writes, or holds a lock
    that only means something on the primary): a session whose server reports
    itself read-only (a standby, a fenced primary) is dropped by :meth:`get`
    before it is used, and a new one opened, so a multi-host DSN moves to the
    primary; when none is writable, :meth:`get` raises ``DatabaseUnavailable``.
    """

    def __init__(self, dsn: str, *, writable: bool = True, **connect_kwargs: Any) -> None:
        self.dsn = dsn
        self.writable = writable
        self.connect_kwargs = connect_kwargs
        self._conn: psycopg.Connection[Any] | None = None

    def get(self) -> psycopg.Connection[Any]:
        """Return the open connection, connecting if needed (may raise DatabaseUnavailable)."""
        if self.writable and self._conn is not None and read_only_reason(self._conn):
            # The server turned read-only under us (fenced, or demoted): connect again.
            self.reset()
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.dsn, writable=self.writable, **self.connect_kwargs)
        return self._conn

    @contextlib.contextmanager
    def session(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection for one run; a connection error drops it (:meth:`reset`), then propagates.

        Any other error (a statement the server refused) keeps the connection.
        """
        try:
            yield self.get()
        except RECONNECT_ERRORS:
            self.reset()
            raise

    @property
    def is_open(self) -> bool:
        """True when a connection is open (it may still turn out to be broken)."""
        return self._conn is not None and not self._conn.closed

    def reset(self) -> None:
        """Close and forget the connection (after an error, or on stop)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            # Closing a broken connection may fail; there is nothing left to do then.
            with contextlib.suppress(Exception):
                conn.close()
