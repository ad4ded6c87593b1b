"""The local fleet's address: how a second shell finds the database of ``queue-ctl up``.

``queue-ctl up`` with no DSN starts an embedded Postgres that listens on a
Unix socket in a private temp folder: no other program could guess its
address. So ``up`` records its database in a small JSON file in the user's
runtime folder (``QUEUE_ENGINE_RUNTIME_DIR``, else
``$XDG_RUNTIME_DIR/queue-engine``, else ``queue-engine-UID`` in the temp
folder) and removes it when it stops; a program started with no DSN reads it
(:func:`resolve`). The record names the process that wrote it (pid and start
time), so a record left by an ``up`` that was killed is recognised as stale
and ignored: a fleet is only found while it runs.

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
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from queue_engine import settings

log = logging.getLogger("queue_engine.localfleet")

#: The record's name inside the runtime folder.
STATE_FILE = "local-fleet.json"
#: libpq variables that name a server or a database: when one is set, the user chose a
#: server, and a program with no DSN connects as libpq says instead of to the fleet.
LIBPQ_TARGET_VARIABLES = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGSERVICE")
#: Two start times of one process as psutil reads them may differ by rounding.
_START_TIME_SLACK_S = 1.0


@dataclass(frozen=True, slots=True)
class LocalFleet:
    """What ``queue-ctl up`` records: who runs the fleet and where its database is."""

    #: The ``queue-ctl up`` process.
    pid: int
    #: Its start time (seconds since the epoch), so a reused pid is not mistaken for it.
    started: float
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


def _process_start(pid: int) -> float | None:
    """The start time of process ``pid``, None when it does not run (or is a zombie)."""
    import psutil  # only when a record exists: most commands never get here

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _parse(raw: str) -> LocalFleet | None:
    try:
        data = json.loads(raw)
        fleet = LocalFleet(
            pid=int(data["pid"]),
            started=float(data["started"]),
            dsn=str(data["dsn"]),
            schema=str(data["schema"]),
            data_dir=None if data.get("data_dir") is None else str(data["data_dir"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return fleet


def find(environ: Mapping[str, str] | None = None) -> LocalFleet | None:
    """The running local fleet, or None; a stale record (its ``up`` is gone) is removed."""
    path = state_file(environ)
    try:
        raw = path.read_text()
    except OSError:
        return None
    if not _private(path.parent):
        log.warning(
            "ignoring %s: its folder is not this user's own, closed to others "
            "(set QUEUE_ENGINE_RUNTIME_DIR to a private folder)",
            path,
        )
        return None
    fleet = _parse(raw)
    if fleet is None:
        log.warning("ignoring %s: not a local-fleet record", path)
        return None
    began = _process_start(fleet.pid)
    if began is None or abs(began - fleet.started) > _START_TIME_SLACK_S:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
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

    The record is written whole (a temp file renamed over it), readable by
    this user only: a DSN given to ``up`` may carry a password. It is removed
    at the end only while it is still this process's.
    """
    import psutil

    folder = runtime_dir(environ)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(folder):
        raise PermissionError(
            f"{folder} is not this user's own folder closed to others: set "
            "QUEUE_ENGINE_RUNTIME_DIR to a private folder"
        )
    me = LocalFleet(
        pid=os.getpid(),
        started=float(psutil.Process().create_time()),
        dsn=dsn,
        schema=schema,
        data_dir=None if data_dir is None else str(data_dir),
    )
    path = folder / STATE_FILE
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".local-fleet-")
    with os.fdopen(fd, "w") as out:
        json.dump({**asdict(me), "written_at": time.time()}, out)
    os.replace(tmp, path)
    try:
        yield path
    finally:
        try:
            current = _parse(path.read_text())
        except OSError:
            current = None
        if current is not None and current.pid == me.pid:
            with contextlib.suppress(OSError):
                path.unlink()
