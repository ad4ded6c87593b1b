"""The local fleet's address: how a second shell finds the database of ``queue-ctl up``.

``queue-ctl up`` with no DSN starts an embedded Postgres that listens on a
Unix socket in a private temp folder: no other program could guess its
address. So ``up`` records its database in a small JSON file in the user's
runtime folder (``QUEUE_ENGINE_RUNTIME_DIR``, else
``$XDG_RUNTIME_DIR/queue-engine``, else ``queue-engine-UID`` in the temp
folder) and removes it when it stops; a program started with no DSN reads it
(:func:`resolve`). ``up`` holds an exclusive ``flock`` on the record for as
long as it runs, and the kernel drops the lock when the process ends, however
it ends: a record whose lock nobody holds was left by an ``up`` that was
killed, and is ignored (no pid to be reused, no clock to compare). A fleet is
only found while it runs.

"No DSN" means none of ``--dsn``, ``QUEUE_ENGINE_DSN`` or the libpq variables
that point at a server (:data:`LIBPQ_TARGET_VARIABLES`) is set: a user who
named a server gets that server, never the fleet. The folder must be the
user's own and closed to others (a record another user could write would send
this user's commands, and their job arguments, to that user's server); a
folder that is not is ignored with a warning.

This module imports only the settings table, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from queue_engine.foundation import settings

log = logging.getLogger("queue_engine.localfleet")

#: The record's name inside the runtime folder.
STATE_FILE = "local-fleet.json"
#: libpq variables that name a server or a database: when one is set, the user chose a
#: server, and a program with no DSN connects as libpq says instead of to the fleet.
LIBPQ_TARGET_VARIABLES = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGSERVICE")


@dataclass(frozen=True, slots=True)
class LocalFleet:
    """What ``queue-ctl up`` records: who runs the fleet and where its database is."""

    #: The ``queue-ctl up`` process.
    pid: int
    #: A libpq URI of the fleet's database.
    dsn: str
    #: The engine's schema in that database.
    schema: str
    #: The embedded Postgres's data folder; None when ``up`` was given a DSN.
    data_dir: str | None = None

    def describe(self) -> str:
        """``the local fleet's database (queue-ctl up, pid 42)`` for the line a program says."""
        return f"the local fleet's database (queue-ctl up, pid {self.pid})"


def runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of the record: the setting, else ``$XDG_RUNTIME_DIR/queue-engine``, else temp."""
    env = os.environ if environ is None else environ
    chosen = settings.RUNTIME_DIR.read(env)
    if chosen:
        return Path(chosen)
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "queue-engine"
    return Path(tempfile.gettempdir()) / f"queue-engine-{os.geteuid()}"


def state_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``queue-ctl up`` records its fleet."""
    return runtime_dir(environ) / STATE_FILE


def names_a_server(environ: Mapping[str, str] | None = None) -> bool:
    """True when a libpq variable of :data:`LIBPQ_TARGET_VARIABLES` is set (non-empty)."""
    env = os.environ if environ is None else environ
    return any(env.get(name) for name in LIBPQ_TARGET_VARIABLES)


def _private(folder: Path) -> bool:
    """True when ``folder`` is a real folder of this user that no one else may write."""
    try:
        info = folder.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return False
    return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _held(fd: int) -> bool:
    """True when another open file holds an exclusive lock on ``fd``'s file (its ``up`` runs)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _parse(raw: str) -> LocalFleet | None:
    try:
        data = json.loads(raw)
        fleet = LocalFleet(
            pid=int(data["pid"]),
            dsn=str(data["dsn"]),
            schema=str(data["schema"]),
            data_dir=None if data.get("data_dir") is None else str(data["data_dir"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return fleet


def find(environ: Mapping[str, str] | None = None) -> LocalFleet | None:
    """The running local fleet, or None (no record, or one whose ``up`` no longer runs)."""
    path = state_file(environ)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd) as record:
        if not _private(path.parent):
            log.warning(
                "ignoring %s: its folder is not this user's own, closed to others "
                "(set QUEUE_ENGINE_RUNTIME_DIR to a private folder)",
                path,
            )
            return None
        if not _held(fd):
            return None  # left by an up that was killed; the next up writes over it
        fleet = _parse(record.read())
    if fleet is None:
        log.warning("ignoring %s: not a local-fleet record", path)
    return fleet


def resolve(
    dsn: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, LocalFleet | None]:
    """The DSN to connect with, and the local fleet when that is where it came from.

    ``dsn`` wins, then ``QUEUE_ENGINE_DSN``; with neither, and no libpq
    variable naming a server, the running local fleet's; else ``""`` (libpq's
    defaults).
    """
    chosen = dsn or settings.DSN.read(environ)
    if chosen or names_a_server(environ):
        return chosen, None
    fleet = find(environ)
    if fleet is None:
        return "", None
    return fleet.dsn, fleet


@contextlib.contextmanager
def recorded(
    dsn: str,
    schema: str,
    *,
    data_dir: Path | None,
    environ: Mapping[str, str] | None = None,
) -> Iterator[Path]:
    """Record this process as the local fleet for the block; remove the record after it.

    The record is written whole and locked before it is renamed into place
    (so no reader sees it unlocked or half written), readable by this user
    only: a DSN given to ``up`` may carry a password. The lock is held until
    the block ends (or the process does); the record is removed then, if it is
    still this one.
    """
    folder = runtime_dir(environ)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(folder):
        raise PermissionError(
            f"{folder} is not this user's own folder closed to others: set "
            "QUEUE_ENGINE_RUNTIME_DIR to a private folder"
        )
    me = LocalFleet(
        pid=os.getpid(),
        dsn=dsn,
        schema=schema,
        data_dir=None if data_dir is None else str(data_dir),
    )
    path = folder / STATE_FILE
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".local-fleet-")
    with os.fdopen(fd, "w") as record:
        fcntl.flock(fd, fcntl.LOCK_EX)
        json.dump(asdict(me), record)
        record.flush()
        os.replace(tmp, path)
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    path.unlink()
