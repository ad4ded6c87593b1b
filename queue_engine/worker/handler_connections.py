"""The connections handlers get from ``ctx.connect()``: one small pool per worker process.

A handler that touches the database used to cost a new connection per job (a
server process, authentication, TLS). The worker now lends it a connection
from a pool of one, opened on the first ``ctx.connect()`` and kept open
between jobs, closed when the worker stops. A worker runs one handler at a
time, so one connection is all it ever needs.

Between two jobs the connection is made as good as new: an open transaction
is rolled back (by the pool), autocommit is restored and what the last job
left in the session is dropped (settings, temporary tables, cursors, advisory
locks, LISTENs: ``DISCARD ALL`` but for psycopg's prepared statements, which
are kept). A connection that broke is replaced.
The handler's session keeps the server's ``synchronous_commit`` (the worker's
own session may run with it off): its writes are as durable as the
application's.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from queue_engine.foundation.db import describe_dsn
from queue_engine.foundation.errors import DatabaseUnavailable

log = logging.getLogger("queue_engine.worker")

#: Application name of the handlers' sessions (``pg_stat_activity``).
HANDLER_APPLICATION_NAME = "queue-engine-handler"
#: How long ``ctx.connect()`` waits for a connection before it raises.
CONNECT_TIMEOUT_S = 10.0


#: What ``DISCARD ALL`` does, except ``DEALLOCATE ALL``: psycopg prepares a
#: statement run five times and keeps track of it; dropping it behind
#: psycopg's back would fail the next job's statement. Keeping them is the
#: point of reusing the session. Sent as one simple query (no parameters).
RESET_SESSION = (
    "CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *;"
    " SELECT pg_advisory_unlock_all(); DISCARD PLANS; DISCARD TEMP; DISCARD SEQUENCES"
)


def _reset(conn: psycopg.Connection[Any]) -> None:
    """Make a returned connection as good as new for the next job (one round trip)."""
    if not conn.autocommit:
        conn.autocommit = True
    conn.execute(RESET_SESSION, prepare=False)


class HandlerConnections:
    """Lends handlers one pooled connection at a time; opens the pool on first use."""

    def __init__(self, dsn: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.dsn = dsn
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._closed = False

    def acquire(self) -> psycopg.Connection[Any]:
        """A connection for the running job; give it back with :meth:`release`."""
        pool = self._open_pool()
        try:
            return pool.getconn(timeout=self.timeout_s)
        except PoolTimeout:
            raise DatabaseUnavailable(
                f"no handler connection to the database at {describe_dsn(self.dsn)} "
                f"within {self.timeout_s:g}s"
            ) from None

    def release(self, conn: psycopg.Connection[Any]) -> None:
        """Take a connection back after the job (closed or broken ones are replaced)."""
        pool = self._pool
        if pool is None or self._closed:
            conn.close()
            return
        try:
            pool.putconn(conn)
        except Exception as exc:  # never let the handler's connection fail the worker
            log.debug("returning the handler connection failed: %s", exc)

    def close(self) -> None:
        """Close the pool and its connection (at worker shutdown); safe twice or unopened."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._closed = True
        if pool is not None:
            pool.close(timeout=5.0)

    def _open_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker's handler connections are closed")
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.dsn,
                    min_size=1,
                    max_size=1,
                    kwargs={
                        "autocommit": True,
                        "application_name": HANDLER_APPLICATION_NAME,
                        "connect_timeout": int(self.timeout_s),
                    },
                    reset=_reset,
                    num_workers=1,
                    name="queue-engine-handler",
                    open=False,
                )
                self._pool.open(wait=False)
            return self._pool
