"""A real PgBouncer in transaction-pooling mode in front of the test server.

The Debian ``pgbouncer`` package provides the binary. When it is missing, the
project's own ``scripts/install-system-packages`` installs it (as root, with
apt); where that cannot work the tests that need it are skipped, saying why.
PgBouncer refuses to run as root, so as root it runs as the embedded server's
unprivileged user, which can also reach the server's socket folder.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from queue_engine.foundation.embedded import SYSTEM_USER
from support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
INSTALLER = REPO / "scripts" / "install-system-packages"
BINARY_NAMES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
START_S = 15.0


def pgbouncer_binary() -> str:
    """The pgbouncer binary, installing the Debian package first if needed; else skip."""
    found = next((b for b in BINARY_NAMES if os.path.exists(b)), shutil.which("pgbouncer"))
    if found is None and INSTALLER.exists() and os.geteuid() == 0:
        subprocess.run([str(INSTALLER), "pgbouncer"], check=False, capture_output=True)
        found = next((b for b in BINARY_NAMES if os.path.exists(b)), None)
    if found is None:
        pytest.skip(
            "pgbouncer is not installed and scripts/install-system-packages could not "
            "install it (needs root and apt): the pooler tests need a real PgBouncer"
        )
    return found


@contextmanager
def transaction_pooler(server_dsn: str, *, pool_size: int = 2) -> Iterator[str]:
    """Run PgBouncer (pool_mode=transaction) for the server of ``server_dsn``; yield its DSN.

    The yielded DSN names the same database as ``server_dsn``; every database
    name is passed through (a ``*`` entry), so clones work too.
    """
    binary = pgbouncer_binary()
    target = conninfo_to_dict(server_dsn)
    folder = Path(tempfile.mkdtemp(prefix="qe-pgbouncer-"))
    port = free_port()
    server = " ".join(
        f"{key}={target[key]}" for key in ("host", "port", "user", "password") if target.get(key)
    )
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = {server}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = any\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {pool_size}\n"
        "max_client_conn = 200\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
        f"pidfile = {folder / 'pgbouncer.pid'}\n"
    )
    user = SYSTEM_USER if os.geteuid() == 0 else None
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (folder, *folder.iterdir()):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    proc = subprocess.Popen(
        [binary, str(folder / "pgbouncer.ini")],
        user=user,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    dsn = make_conninfo(
        "",
        host="127.0.0.1",
        port=str(port),
        dbname=target.get("dbname", "postgres"),
        user=target.get("user", "postgres"),
    )
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = folder / "pgbouncer.log"
                    raise RuntimeError(
                        f"pgbouncer did not start: {log.read_text() if log.exists() else ''}"
                    ) from None
                time.sleep(0.1)
        yield dsn
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
