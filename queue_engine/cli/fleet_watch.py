"""``queue-ctl up``'s eye on its database: say when the fleet is ready, end it when the database is gone.

A fleet whose database was deleted used to log ``AdminShutdown`` and retry
for ever while ``up`` kept supervising processes that could never work. The
supervisor asks :class:`DatabaseWatch` once per tick (it looks at most every
``interval_s``); an answer other than None ends the fleet, and ``up`` exits
with that one line (exit 69).

- For the embedded Postgres that ``up`` started, "gone" is its server process
  ended or its data folder deleted (:meth:`EmbeddedPostgres.gone`, a pid-file
  read: no connection).
- For a database given by DSN, a restart or a network blip is normal life
  (every daemon reconnects with backoff), so only an answer that cannot get
  better ends the fleet: the database no longer exists (SQLSTATE 3D000). It is
  probed every ``probe_s``.

Until the fleet is ready, the database is probed every ``interval_s`` so that
``up`` can say "ready" once: when the orchestrator has migrated the schema and
every process of the fleet has registered past its start (the scheduler after
syncing its code schedules, each worker once it LISTENs). A second shell can
then enqueue, list schedules or run one at once, and it works.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import APPLICATION_NAME
from queue_engine.foundation.embedded import EmbeddedPostgres
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, schema_version

#: SQLSTATE ``invalid_catalog_name``: the database named in the DSN does not exist.
DATABASE_MISSING = "3D000"


class DatabaseWatch:
    """Called by the supervisor every tick: None while all is well, else why the fleet must end."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        server: EmbeddedPostgres | None,
        *,
        interval_s: float = 1.0,
        probe_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.server = server
        self.interval_s = interval_s
        self.probe_s = probe_s
        self.clock = clock
        #: Why the database is gone, once it is.
        self.gone: str | None = None
        #: True once the schema was found migrated (and "ready" said).
        self.ready = False
        self._next_look = clock()
        self._next_probe = clock()

    def __call__(self, say: Callable[[str], None], pids: Sequence[int]) -> str | None:
        """Look (at most every ``interval_s``); ``say`` prints behind ``up``; ``pids``: the fleet's."""
        now = self.clock()
        if self.gone is not None or now < self._next_look:
            return self.gone
        self._next_look = now + self.interval_s
        if self.server is not None:
            reason = self.server.gone()
            if reason is not None:
                self.gone = f"the fleet's embedded Postgres is gone: {reason}"
                return self.gone
        if self.ready and (self.server is not None or now < self._next_probe):
            return None
        self._next_probe = now + self.probe_s
        self._probe(say, pids)
        return self.gone

    def _probe(self, say: Callable[[str], None], pids: Sequence[int]) -> None:
        try:
            with psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=2, application_name=APPLICATION_NAME
            ) as conn:
                version = schema_version(conn, self.schema)
                up = 0
                if not self.ready and version >= ENGINE_SCHEMA_VERSION:
                    row = conn.execute(
                        queries.query("fleet_processes_ready", self.schema),
                        {"host": socket.gethostname(), "pids": list(pids)},
                    ).fetchone()
                    up = int(row[0]) if row else 0
        except psycopg.OperationalError as exc:
            if exc.sqlstate == DATABASE_MISSING:
                self.gone = f"the fleet's database does not exist any more ({exc.sqlstate})"
            return
        except psycopg.Error:
            return
        if not self.ready and version >= ENGINE_SCHEMA_VERSION and up >= len(pids):
            self.ready = True
            say(f"ready: {up} processes up, schema {self.schema} at version {version}")
