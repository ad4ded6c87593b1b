"""The producer's connections: a psycopg pool, with the session just returned kept at hand.

Why not the pool alone: taking a session from ``psycopg_pool`` and giving it
back (``getconn``/``putconn``: a re-entrant lock, statistics, three log
calls, the expiry check, a deque) is 4.5 us of warm Python, and 15-18 us of a
single enqueue's wall time once it runs between server round trips with cold
caches: about 5 % of the call (bench/runs/2026-11-27-log.md, "Single enqueue: the
client's Python, cut"). Most producers call from one thread at a time, and
the session a call returns is the one the next call takes; so it is kept
here, outside the pool, and taken back with one plain lock.

What the pool guarantees stays true:

* A session is kept only when no other call is in flight. A call that finds
  none kept waits on the pool; a session returned while any call is in flight
  goes back to the pool, so a caller waiting there is served as before (one
  session and two threads take turns, neither starves).
* A kept session goes back to the pool once it has been out for
  :data:`HOLD_S` seconds: the pool's own checks (``max_lifetime``, a broken
  session replaced) apply to it as to the others, at most that much later.
* Only an idle, open session is kept; any other goes back to the pool, which
  rolls it back or replaces it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from queue_engine.foundation.db import SchemaErrors
from queue_engine.foundation.errors import DatabaseUnavailable

Connection = psycopg.Connection[Any]
AsyncConnection = psycopg.AsyncConnection[Any]
C = TypeVar("C", Connection, AsyncConnection)

#: The longest a session stays out of the pool between two of the pool's checks.
HOLD_S = 1.0


class _Keeper(Generic[C]):
    """The rules of the kept session (see the module), apart from how a pool is called.

    Not thread-safe by itself: :class:`KeptConnectionPool` calls it under a
    lock, :class:`KeptAsyncConnectionPool` between two awaits of one event
    loop, where nothing else runs.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._kept: C | None = None
        self._in_flight = 0
        #: When each session out of the pool is due back, by id (while it is out).
        self._due: dict[int, float] = {}

    def _from_slot(self) -> tuple[C | None, C | None]:
        """Count a call in: (the kept session if still fresh, a stale one to return)."""
        self._in_flight += 1
        conn, self._kept = self._kept, None
        if conn is None:
            return None, None
        if self._clock() < self._due[id(conn)]:
            return conn, None
        del self._due[id(conn)]
        return None, conn

    def _from_pool(self, conn: C) -> None:
        self._due[id(conn)] = self._clock() + HOLD_S

    def _call_failed(self) -> None:
        self._in_flight -= 1

    def _keep(self, conn: C) -> bool:
        """Count a call out; keep its session (True) or hand it back to the pool (False)."""
        self._in_flight -= 1
        if (
            self._kept is None
            and self._in_flight == 0
            and conn.pgconn.transaction_status == TransactionStatus.IDLE
        ):
            self._kept = conn
            return True
        self._due.pop(id(conn), None)
        return False

    def _unkeep(self) -> C | None:
        conn, self._kept = self._kept, None
        if conn is not None:
            self._due.pop(id(conn), None)
        return conn


class KeptConnectionPool(_Keeper[Connection]):
    """A :class:`~psycopg_pool.ConnectionPool` and the one session kept out of it."""

    def __init__(
        self, pool: ConnectionPool[Any], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(clock)
        self.pool = pool
        self._lock = threading.Lock()

    def take(self, timeout: float) -> Connection:
        """A session for one call: the kept one if it is fresh enough, else the pool's.

        Give it back with :meth:`give`, also when the call fails.
        """
        with self._lock:
            conn, stale = self._from_slot()
        if conn is not None:
            return conn
        if stale is not None:
            self.pool.putconn(stale)
        try:
            fresh: Connection = self.pool.getconn(timeout=timeout)
        except BaseException:
            with self._lock:
                self._call_failed()
            raise
        with self._lock:
            self._from_pool(fresh)
        return fresh

    def give(self, conn: Connection) -> None:
        """Keep the session for the next call, or return it to the pool (see the module)."""
        with self._lock:
            if self._keep(conn):
                return
        self.pool.putconn(conn)

    def release(self) -> None:
        """Return the kept session to the pool (before closing it, or to look at its figures)."""
        with self._lock:
            conn = self._unkeep()
        if conn is not None:
            self.pool.putconn(conn)

    def close(self) -> None:
        """Return the kept session and close the pool."""
        self.release()
        self.pool.close()

    def session(self, schema: str) -> PooledSession:
        """``with``: a session for one call, given back after it, its errors translated."""
        return PooledSession(self, schema)


class KeptAsyncConnectionPool(_Keeper[AsyncConnection]):
    """:class:`KeptConnectionPool` for asyncio: an ``AsyncConnectionPool`` and its kept session."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(clock)
        self.pool = pool

    async def take(self, timeout: float) -> AsyncConnection:
        """As :meth:`KeptConnectionPool.take`."""
        conn, stale = self._from_slot()
        if conn is not None:
            return conn
        if stale is not None:
            await self.pool.putconn(stale)
        try:
            fresh: AsyncConnection = await self.pool.getconn(timeout=timeout)
        except BaseException:
            self._call_failed()
            raise
        self._from_pool(fresh)
        return fresh

    async def give(self, conn: AsyncConnection) -> None:
        """As :meth:`KeptConnectionPool.give`."""
        if not self._keep(conn):
            await self.pool.putconn(conn)

    async def release(self) -> None:
        """As :meth:`KeptConnectionPool.release`."""
        conn = self._unkeep()
        if conn is not None:
            await self.pool.putconn(conn)

    async def close(self) -> None:
        """Return the kept session and close the pool."""
        await self.release()
        await self.pool.close()


class PooledSession(SchemaErrors):
    """One call's session of a :class:`KeptConnectionPool` (see :meth:`~KeptConnectionPool.session`).

    A class rather than a generator-based context manager, for the same
    reason as :class:`~queue_engine.foundation.db.SchemaErrors`, whose translation of a
    missing schema or a lost connection it adds.
    """

    __slots__ = ("_conn", "_pool")

    def __init__(self, pool: KeptConnectionPool, schema: str) -> None:
        super().__init__(schema)
        self._pool = pool

    def __enter__(self) -> Connection:  # type: ignore[override]
        try:
            self._conn = self._pool.take(timeout=30)
        except PoolTimeout:
            raise DatabaseUnavailable("no database connection available within 30 s") from None
        return self._conn

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            # The server turned read-only (a fenced or demoted primary): closed,
            # the session is replaced by the pool, and a multi-host DSN with
            # target_session_attrs=read-write opens it on the primary.
            self._conn.close()
        self._pool.give(self._conn)
        super().__exit__(exc_type, exc, tb)


class AsyncPooledSession(SchemaErrors):
    """:class:`PooledSession` for asyncio (``async with``), on a :class:`KeptAsyncConnectionPool`.

    It takes the pool from ``open_pool`` when entered: an ``AsyncClient``
    opens its pool on first use, which needs an await.
    """

    __slots__ = ("_conn", "_open_pool", "_pool")

    def __init__(
        self, open_pool: Callable[[], Awaitable[KeptAsyncConnectionPool]], schema: str
    ) -> None:
        super().__init__(schema)
        self._open_pool = open_pool

    async def __aenter__(self) -> AsyncConnection:
        self._pool = await self._open_pool()
        try:
            self._conn = await self._pool.take(timeout=30)
        except PoolTimeout:
            raise DatabaseUnavailable("no database connection available within 30 s") from None
        return self._conn

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            await self._conn.close()  # as in PooledSession: replaced by the pool
        await self._pool.give(self._conn)
        self.__exit__(exc_type, exc, tb)
