"""The worker's one database connection: open, LISTEN, retry, reconnect, repair.

One connection carries everything the worker itself does (LISTEN, claim,
finish, heartbeat), guarded by one lock because the heartbeat thread shares
it. :meth:`WorkerConnection.run` runs a function on it and, when the
connection is lost, re-opens it with capped, jittered backoff. Every (re)open
sets the session up (``synchronous_commit``, generic plans, LISTEN on the
jobs, cancel and controls channels), registers the worker's row and repairs
what a lost session took with it (:meth:`WorkerConnection.repair`).

The backoff wait is an :class:`~queue_engine.daemon.outage.OutageProbe` wait: while
the server does not accept connections it is pinged every second, and the
wait ends as soon as it does, or as soon as another thread (the heartbeat)
has reconnected. So the main loop claims again within about a second of
Postgres being back, not after the rest of a backoff that grew during the
outage (up to ``QUEUE_ENGINE_RECONNECT_MAX_S``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from queue_engine.daemon.outage import OutageProbe, reconnect_backoff
from queue_engine.daemon.service import REAL_TIMING, Timing
from queue_engine.daemon.startup import StopRequested
from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import (
    RECONNECT_OR_UNREACHABLE,
    CursorKeepingConnection,
    connect,
    first_line,
    refuse_read_only,
)
from queue_engine.foundation.errors import DatabaseUnavailable
from queue_engine.foundation.logs import log_event
from queue_engine.worker import store
from queue_engine.worker.jobs import HeldJobs

log = logging.getLogger("queue_engine.worker")

T = TypeVar("T")
Connection = psycopg.Connection[Any]

#: First delay of the reconnect backoff; its cap is ``QUEUE_ENGINE_RECONNECT_MAX_S``.
RECONNECT_BASE_S = 0.2


class WorkerConnection:
    """The worker's session: one lock, reconnect with backoff, LISTEN, repair after connect.

    ``on_notify`` handles every notification read (the main loop's waits and
    the heartbeat's polls); ``on_connect`` runs after each (re)connect, under
    the lock (the worker drops its scale slot and re-reads its controls).
    ``mark_alive`` is called while retrying on the main thread, so a database
    outage does not look like a hung main loop to the systemd watchdog.
    """

    def __init__(
        self,
        *,
        dsn: str,
        schema: str,
        synchronous_commit: str,
        worker_id: str,
        queue: str,
        host: str,
        jobs: HeldJobs,
        stopping: threading.Event,
        on_notify: Callable[[psycopg.Notify], None],
        on_connect: Callable[[], None],
        mark_alive: Callable[[], None],
        on_notice: Callable[[str | None], None] | None = None,
        reconnect_max_s: float = table.RECONNECT_MAX_S.default,
        timing: Timing = REAL_TIMING,
        outage: OutageProbe | None = None,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.synchronous_commit = synchronous_commit
        self.worker_id = worker_id
        self.queue = queue
        self.host = host
        self.jobs = jobs
        self.channels = (
            queries.jobs_channel(schema),
            queries.cancel_channel(schema),
            queries.controls_channel(schema),
        )
        self._stopping = stopping
        self._on_notify = on_notify
        self._on_connect = on_connect
        #: Each server notice's text (a rated key's due token: worker/ratewait.py).
        self._on_notice = on_notice
        self._mark_alive = mark_alive
        self.backoff = reconnect_backoff(RECONNECT_BASE_S, reconnect_max_s)
        self.timing = timing
        self._clock = timing.clock
        #: Ends a backoff wait once the server accepts connections again.
        self.outage = outage if outage is not None else OutageProbe(dsn)
        self.lock = threading.RLock()  # guards _conn: main loop + heartbeat thread
        self._conn: Connection | None = None
        #: True from a lost connection until the next successful statement.
        self.reconnecting = False

    # -- running statements ---------------------------------------------------------

    def run(
        self,
        fn: Callable[[Connection], T],
        *,
        attempts: int | None = None,
        deadline: float | None = None,
    ) -> T:
        """Run ``fn`` on the connection, reconnecting with backoff on connection errors.

        ``attempts`` bounds the tries (None: until it works or the worker
        stops), and so does ``deadline`` (a time on the worker's clock).
        """
        failures = 0
        while True:
            with self.lock:
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = self._open()
                        if failures or self.reconnecting:
                            log_event(
                                log, logging.INFO, "worker.reconnected", worker_id=self.worker_id
                            )
                        self.reconnecting = False
                    return fn(self._conn)
                except RECONNECT_OR_UNREACHABLE as exc:
                    self.drop()
                    self.reconnecting = True
                    error = first_line(exc)
            failures += 1
            if threading.current_thread() is threading.main_thread():
                self._mark_alive()
            if (attempts is not None and failures >= attempts) or (
                deadline is not None and self._clock() >= deadline
            ):
                raise DatabaseUnavailable(f"lost the database: {error}")
            delay = self.backoff.delay(failures, self.timing.rand)
            if deadline is not None:
                delay = max(0.0, min(delay, deadline - self._clock()))
            log_event(
                log,
                logging.WARNING,
                "worker.db_error",
                worker_id=self.worker_id,
                error=error,
                retry_in_s=round(delay, 2),
            )
            if attempts is None and self._stopping.is_set():
                raise StopRequested()
            self._wait(delay)

    def _wait(self, delay: float) -> None:
        """The backoff wait: ended by a stop, or once the database is back after an outage."""
        self.outage.wait(
            self._stopping,
            delay,
            wait=self.timing.wait,
            clock=self._clock,
            reconnected=self._connected,
        )

    def _connected(self) -> bool:
        """True when another thread has (re)opened the connection meanwhile."""
        conn = self._conn
        return conn is not None and not conn.closed

    def drop(self) -> None:
        """Close the connection (a broken one may fail to close: ignored)."""
        with self.lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:  # a broken connection may fail to close
                log.debug("closing the broken connection failed: %s", exc)

    # -- notifications --------------------------------------------------------------

    def listen(self, timeout: float) -> None:
        """Wait up to ``timeout`` for one notification (reconnecting if needed) and handle it."""

        def wait(conn: Connection) -> None:
            for notify in conn.notifies(timeout=timeout, stop_after=1):
                self._on_notify(notify)

        self.run(wait)

    def poll_notifications(self) -> None:
        """Handle notifications already on the socket (a cancel NOTIFY), never waiting.

        Skipped when another thread uses the connection: the heartbeat calls
        this every tick and must not queue behind a long statement.
        """
        if not self.lock.acquire(blocking=False):
            return
        try:
            conn = self._conn
            if conn is None or conn.closed:
                return
            for notify in conn.notifies(timeout=0):
                self._on_notify(notify)
        except psycopg.Error as exc:
            log.debug("notification poll failed: %s", exc)
        finally:
            self.lock.release()

    # -- opening --------------------------------------------------------------------

    def _open(self) -> Connection:
        conn = connect(
            self.dsn,
            application_name="queue-claim-worker",
            connection_class=CursorKeepingConnection,
        )
        refuse_read_only(conn, self.dsn)  # a standby: connect again, maybe elsewhere
        on_notice = self._on_notice
        if on_notice is not None:
            conn.add_notice_handler(lambda diag: on_notice(diag.message_primary))
        try:
            store.configure_session(conn, synchronous_commit=self.synchronous_commit)
            for channel in self.channels:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self.register(conn, "idle")
            self.repair(conn)
        except BaseException:
            conn.close()
            raise
        self._on_connect()
        return conn

    def register(self, conn: Connection, state: str) -> None:
        """Insert (or refresh) the worker's row."""
        store.register(
            conn,
            self.schema,
            worker_id=self.worker_id,
            queue=self.queue,
            host=self.host,
            pid=os.getpid(),
            state=state,
        )

    def repair(self, conn: Connection) -> None:
        """Repair what a lost session took with it: orphaned claims and advisory locks.

        Runs under the connection lock (the main loop is not half-way through
        a finish-and-claim's bookkeeping). The advisory lock of a running keyed
        job died with the old session: take it again; if another session took
        it meanwhile, the job can no longer be run safely beside it, so the
        execution is given up as a zombie (stopped, outcome not written).
        """
        held = self.jobs.all()
        released = store.release_orphans(
            conn, self.schema, worker_id=self.worker_id, held_ids=[h.job.id for h in held]
        )
        if released:
            log_event(
                log,
                logging.WARNING,
                "worker.orphans_released",
                worker_id=self.worker_id,
                job_ids=",".join(map(str, released)),
                reason="running under this worker's id but not held by it: a claim whose "
                "reply was lost with the connection, or a finish the server lost in a crash",
            )
        for h in held:
            key = h.job.lock_key
            if not h.advisory_locked or key is None or h.lost:
                continue
            if store.try_lock_key(conn, self.schema, key):
                continue
            h.advisory_locked = False
            self.jobs.mark_lost(
                h,
                "its lock key's advisory lock was taken by another session "
                "while this worker was reconnecting",
            )
