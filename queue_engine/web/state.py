"""``WebState``: the one object a ``queue-web`` app holds (``app.state.web``).

It owns the database pools and picks one per request from the caller's scope:
a read-scope request borrows from the read pool (``QUEUE_ENGINE_WEB_READ_DSN``,
the least-privilege monitor role) when one is configured, so even a bug in a
route cannot make the database write for it; a producer-scope request borrows
from the producer pool (``QUEUE_ENGINE_WEB_PRODUCER_DSN``) likewise; everything
else uses the main pool. Pools open in the background: the process starts and
answers ``/health`` while the database is down, and a request that cannot get
a connection within ``QUEUE_ENGINE_WEB_DB_TIMEOUT_S`` gets a 503.

Routes are plain (sync) functions run in the server's thread pool, and call
the same core functions as ``queue-ctl`` on a borrowed connection: one code
path, two faces.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from queue_engine.foundation.db import APPLICATION_NAME, describe_dsn, schema_errors
from queue_engine.foundation.errors import DatabaseUnavailable
from queue_engine.web.first_run import SignInLink
from queue_engine.web.settings import Scope, WebSettings

Connection = psycopg.Connection[Any]

#: During an outage every request answers 503; its warning is logged this often at most.
OUTAGE_WARNING_EVERY_S = 60.0


def _pool(dsn: str, name: str, settings: WebSettings) -> ConnectionPool:
    return ConnectionPool(
        dsn,
        min_size=1,
        max_size=settings.pool_size,
        kwargs={
            "autocommit": True,
            "application_name": f"{APPLICATION_NAME}-web",
            "connect_timeout": max(1, int(settings.db_timeout_s)),
        },
        # A connection broken by a database restart is found and replaced
        # before a request gets it, rather than failing that request.
        check=ConnectionPool.check_connection,
        open=False,
        name=name,
        timeout=settings.db_timeout_s,
    )


@dataclass
class WebState:
    """The pools, the settings, the sign-in link and the start time of one app."""

    settings: WebSettings
    #: The first-run sign-in link (``queue-web`` with nothing configured, on loopback).
    sign_in_link: SignInLink | None = None
    started_monotonic: float = field(default_factory=time.monotonic)
    pools: dict[str, ConnectionPool] = field(default_factory=dict)
    #: When the last outage warning was logged (monotonic; None: never).
    outage_warned_at: float | None = None

    def open(self) -> None:
        """Create and start opening the pools (in the background: the database may be down)."""
        if self.pools:
            return
        s = self.settings
        self.pools["main"] = _pool(s.dsn, "queue-web", s)
        if s.read_dsn:
            self.pools["read"] = _pool(s.read_dsn, "queue-web-read", s)
        if s.producer_dsn:
            self.pools["producer"] = _pool(s.producer_dsn, "queue-web-producer", s)
        for pool in self.pools.values():
            pool.open(wait=False)

    def close(self) -> None:
        """Close every pool; safe twice."""
        pools, self.pools = self.pools, {}
        for pool in pools.values():
            pool.close()

    @property
    def schema(self) -> str:
        """The engine schema every route reads."""
        return self.settings.schema

    @property
    def uptime_s(self) -> float:
        """Seconds since the app was created."""
        return time.monotonic() - self.started_monotonic

    def outage_warning_due(self, *, now: float | None = None) -> bool:
        """True at most once per :data:`OUTAGE_WARNING_EVERY_S`: a 503 is logged at warning then."""
        at = time.monotonic() if now is None else now
        if (
            self.outage_warned_at is not None
            and at - self.outage_warned_at < OUTAGE_WARNING_EVERY_S
        ):
            return False
        self.outage_warned_at = at
        return True

    def pool_for(self, scope: Scope | None) -> ConnectionPool:
        """The pool a request of ``scope`` borrows from (see the module doc)."""
        if not self.pools:
            raise DatabaseUnavailable("the database pools are not open (the app is not started)")
        if scope is Scope.READ and "read" in self.pools:
            return self.pools["read"]
        if scope is Scope.PRODUCER and "producer" in self.pools:
            return self.pools["producer"]
        return self.pools["main"]

    def _dsn_of(self, pool: ConnectionPool) -> str:
        s = self.settings
        dsns = {"main": s.dsn, "read": s.read_dsn, "producer": s.producer_dsn}
        return next((dsns[k] or "" for k, p in self.pools.items() if p is pool), "")

    @contextmanager
    def connection(self, scope: Scope | None) -> Iterator[Connection]:
        """Borrow an autocommit connection for ``scope``; 503 (DatabaseUnavailable) when none comes."""
        pool = self.pool_for(scope)
        try:
            with pool.connection() as conn, schema_errors(self.schema):
                yield conn
        except PoolTimeout:
            raise DatabaseUnavailable(
                f"no connection to the database at {describe_dsn(self._dsn_of(pool))} within "
                f"{self.settings.db_timeout_s:g} s"
            ) from None
