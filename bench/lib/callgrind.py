"""Server instructions counted by valgrind: a measure that machine load does not move.

On a shared machine, time per statement moves with everyone else's load;
instructions do not. A bench makes a data folder (:func:`prepare_folder`:
initdb, migrations, its rows, DDL, ``ANALYZE``, ``CHECKPOINT``), stops the
server, and runs PostgreSQL in single-user mode under ``valgrind
--tool=callgrind`` on a script of statements (:func:`run_single`). Two runs of
N1 and N2 statements give one statement's cost as the difference over N2 - N1:
start-up and ``PREPARE`` cancel out. Single-user mode runs no autovacuum, WAL
writer or checkpointer: this is the backend's own cost. It needs ``valgrind``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import psycopg

from lib.workers import enqueue_noops
from queue_engine.foundation.embedded import EmbeddedPostgres
from queue_engine.foundation.migrate import Migrator

#: The database of a data folder.
DATABASE = "qe_stmt"
#: The last statement of every run: the WAL position, read back by :func:`run_single`.
WAL_END = "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn AS wal_end;"


def callgrind_total(files: Iterable[Path]) -> int | None:
    """The instruction total of the first callgrind output file that has one, or None."""
    for f in files:
        for line in f.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return None


def _noops(dsn: str, jobs: int) -> None:
    enqueue_noops(dsn, jobs)


def prepare_folder(
    folder: Path, ddl: str, jobs: int, load: Callable[[str, int], None] = _noops
) -> tuple[EmbeddedPostgres, int]:
    """A data folder holding the migrated database, loaded by ``load``; the server stopped.

    ``load(dsn, jobs)``: by default ``jobs`` queued no-op jobs. Returns the
    server and its WAL position in bytes.
    """
    pg = EmbeddedPostgres(folder / "data")
    dsn = pg.start()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {DATABASE}")
    dsn = pg.dsn(DATABASE)
    Migrator(dsn).up()
    load(dsn, jobs)
    with psycopg.connect(dsn, autocommit=True) as conn:
        if ddl:
            conn.execute(ddl)  # type: ignore[arg-type]  # the bench's own fixed DDL
        conn.execute("ANALYZE")
        conn.execute("CHECKPOINT")
        row = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    pg.stop()
    return pg, int(row[0])


def run_single(pg: EmbeddedPostgres, input_text: str, out_dir: Path) -> tuple[int, int]:
    """Run single-user PostgreSQL under callgrind; (instructions, WAL position at the end).

    ``input_text`` is ``-j`` input (statements end with a semicolon and a blank
    line) whose last statement selects ``... AS wal_end``.
    """
    cg_out = out_dir / f"callgrind.{os.urandom(4).hex()}"
    argv = [
        *("valgrind", "--tool=callgrind", f"--callgrind-out-file={cg_out}"),
        *(str(pg.bin_dir / "postgres"), "--single", "-j", "-D", str(pg.data_dir), DATABASE),
    ]
    kwargs = {"user": pg.user} if pg.user else {}
    done = subprocess.run(
        argv, input=input_text, capture_output=True, text=True, check=False, **kwargs
    )
    collected = [
        int(line.rsplit(":", 1)[1].replace(",", "").strip())
        for line in done.stderr.splitlines()
        if "Collected :" in line
    ]
    wal = [int(m.group(1)) for m in re.finditer(r'wal_end = "(\d+)"', done.stdout)]
    if cg_out.exists():
        cg_out.unlink()
    if not collected or not wal or "ERROR" in done.stdout + done.stderr:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
        raise SystemExit("single-user run failed")
    return collected[0], wal[0]


def single_user_input(statements: Iterable[str]) -> str:
    """``-j`` input for single-user mode: each statement, then :data:`WAL_END`, a blank line apart."""
    return "\n\n".join([*statements, WAL_END]) + "\n"


def per_statement(
    label: str,
    counts: tuple[int, int],
    ddl: str,
    jobs: int,
    script: Callable[[EmbeddedPostgres, int], str],
    load: Callable[[str, int], None] = _noops,
) -> tuple[float, float]:
    """Instructions and WAL bytes of one statement: runs of N1 and N2, the difference over N2 - N1.

    Each run gets a data folder of its own (:func:`prepare_folder` with ``ddl``,
    ``jobs`` and ``load``); ``script(pg, n)`` is its input for ``n`` statements
    (the server is stopped; a script may start it to read ids, and stop it).
    """
    results: list[tuple[int, int]] = []
    for n in counts:
        folder = Path(tempfile.mkdtemp(prefix="qe-callgrind-"))
        folder.chmod(0o777)  # as root, the server runs as another user
        try:
            pg, wal_start = prepare_folder(folder, ddl, jobs, load)
            try:
                instructions, wal_end = run_single(pg, script(pg, n), folder)
            finally:
                shutil.rmtree(pg.socket_dir, ignore_errors=True)
            results.append((instructions, wal_end - wal_start))
            print(f"  {label} N={n}: {instructions:,} instructions", file=sys.stderr)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    (first, first_wal), (second, second_wal) = results
    statements = counts[1] - counts[0]
    return (second - first) / statements, (second_wal - first_wal) / statements
