"""Server instructions per job inserted, single-row and bulk, with and without a DDL. Not a test.

Usage::

    python bench/insert_check_cost.py --ddl migrations/0015_jobs_row_check.down.sql

Migration 0015 traded the per-statement parse of jobs' twelve CHECKs for a
PL/pgSQL call per row written: a statement writing one row gains, one writing
many pays. This counts both ends for INSERTs, as ``statement_cost.py`` counts
the worker's statement (PostgreSQL in single-user mode under callgrind, two
runs of N1 and N2 statements, the difference over N2 - N1): plain INSERTs of
one job (``INSERT INTO jobs (queue, task) VALUES (...)``) and of ``--bulk``
jobs (``INSERT ... SELECT ... FROM generate_series``), each its own
transaction, on this build's schema and with ``--ddl`` applied. The INSERTs
are plain SQL, not the client's enqueue statements: the CHECK's share is the
same, the rest of an enqueue's cost is not counted.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from statement_cost import prepare_folder, run_single


def script(n: int, rows: int) -> str:
    """N INSERT statements of ``rows`` rows each (single-user ``-j`` input)."""
    if rows == 1:
        insert = "INSERT INTO queue_engine.jobs (queue, task) VALUES ('bench', 'noop');"
    else:
        insert = (
            "INSERT INTO queue_engine.jobs (queue, task)"
            f" SELECT 'bench', 'noop' FROM generate_series(1, {rows});"
        )
    lines = ["SET synchronous_commit = off;", *([insert] * n)]
    lines.append("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn AS wal_end;")
    return "\n\n".join(lines) + "\n"


def per_row(ddl: str, rows: int, n1: int, n2: int) -> float:
    counts: list[int] = []
    for n in (n1, n2):
        folder = Path(tempfile.mkdtemp(prefix="qe-inscost-"))
        folder.chmod(0o777)
        try:
            pg, _ = prepare_folder(folder, ddl, 0)
            try:
                instructions, _wal = run_single(pg, script(n, rows), folder)
            finally:
                shutil.rmtree(pg.socket_dir, ignore_errors=True)
            counts.append(instructions)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return (counts[1] - counts[0]) / (n2 - n1) / rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ddl", required=True, help="SQL file for the 'with DDL' runs")
    parser.add_argument("--bulk", type=int, default=1000, help="rows per bulk INSERT")
    opts = parser.parse_args()
    ddl = Path(opts.ddl).read_text().replace("__SCHEMA__", "queue_engine")
    print("| INSERT | this build | with --ddl | difference per row |")
    print("|---|---|---|---|")
    for label, rows, n1, n2 in (("one row", 1, 200, 600), (f"{opts.bulk} rows", opts.bulk, 4, 12)):
        new, old = per_row("", rows, n1, n2), per_row(ddl, rows, n1, n2)
        print(f"| {label} | {new:,.0f} | {old:,.0f} | {new - old:+,.0f} |", flush=True)


if __name__ == "__main__":
    main()
