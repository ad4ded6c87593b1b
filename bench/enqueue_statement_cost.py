"""Server instructions per single enqueue, counted by valgrind; pgqueuer's beside it. Not a test.

Usage::

    python bench/enqueue_statement_cost.py                       # this build's variants
    python bench/enqueue_statement_cost.py --pgqueuer-python /path/to/harness/.venv/bin/python

The single-enqueue twin of ``statement_cost.py`` (same method: single-user
PostgreSQL under ``valgrind --tool=callgrind``, two runs of N1 and N2
statements per variant, the difference over N2 - N1 is one statement, start-up
and PREPARE cancelling out). Each EXECUTE is its own transaction with
``synchronous_commit`` on, as the shared harness enqueues (one transaction per
job; the commit's WAL flush is counted as instructions, not as waiting).

Variants: this build's ``enqueue_plain.sql`` as the client sends it (the
harness's call: queue, task, ``{}`` args, defaults elsewhere); the same
with the wake-up in a statement trigger of its own (0026's down file: the
build before it); with
the rules as 0016's CHECK calling ``jobs_row_ok`` (0017's down file); with
``jobs_row_ok`` as migration 0015 wrote it (0017's and 0016's down files);
with the twelve CHECK constraints of the build before migration 0015 (down
files back to 0015's); without the row rules at all (what they cost; not a
candidate, they are the SQL API's validation). With ``--pgqueuer-python``,
pgqueuer's own ``Queries.enqueue`` statement on its own schema (both
rendered by that interpreter's pgqueuer), called as the harness calls it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from statement_cost import downs, prepare_folder, run_single  # noqa: E402

SCHEMA = "queue_engine"


def qe_statement() -> tuple[str, str]:
    """(PREPARE text with $n, EXECUTE argument list) of the plain single enqueue."""
    text = (ROOT / "queue_engine" / "sql" / "enqueue_plain.sql").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    text = text.replace("__SCHEMA__", SCHEMA)
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = re.sub(r"%\((\w+)\)s", number, text)
    # What Client.enqueue("noop", queue="bench", args={}) sends (operations.JobSpec defaults).
    values = {
        "queue": "'bench'",
        "task": "'noop'",
        "args": "'{}'",
        "priority": "100",
        "max_attempts": "5",
    }
    return text, ", ".join(values.get(name, "NULL") for name in names)


NO_RULES = "DROP TRIGGER jobs_check_row ON queue_engine.jobs"


def script(prepare: str, execute: str, n: int) -> str:
    lines = [f"PREPARE enq AS {prepare};"]
    lines += [f"EXECUTE enq({execute});"] * n
    lines.append("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn AS wal_end;")
    return "\n\n".join(lines) + "\n"


def no_load(dsn: str, jobs: int) -> None:
    """The harness enqueues into a fresh table."""


def measure(label: str, ddl: str, prepare: str, execute: str, n1: int, n2: int) -> None:
    counts: list[tuple[int, int]] = []
    for n in (n1, n2):
        folder = Path(tempfile.mkdtemp(prefix="qe-enqcost-"))
        folder.chmod(0o777)
        try:
            pg, wal_start = prepare_folder(folder, ddl, 0, no_load)
            try:
                instructions, wal_end = run_single(pg, script(prepare, execute, n), folder)
            finally:
                shutil.rmtree(pg.socket_dir, ignore_errors=True)
            counts.append((instructions, wal_end - wal_start))
            print(f"  {label} N={n}: {instructions:,} instructions", file=sys.stderr)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    per = (counts[1][0] - counts[0][0]) / (n2 - n1)
    wal = (counts[1][1] - counts[0][1]) / (n2 - n1)
    print(f"| {label} | {per:,.0f} | {wal:,.0f} |", flush=True)


def pgqueuer_sql(python: str) -> tuple[str, str]:
    """(install DDL, enqueue statement) rendered by ``python``'s pgqueuer."""
    code = (
        "import json\n"
        "from pgqueuer.adapters.persistence.qb import QueryBuilderEnvironment as E\n"
        "from pgqueuer.adapters.persistence.qb import QueryQueueBuilder as Q\n"
        "print(json.dumps([E().build_install_query(), Q().build_enqueue_query('raise')]))\n"
    )
    import json

    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    install, enqueue = json.loads(out.stdout)
    return install, enqueue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="200,600", help="N1,N2 statements")
    parser.add_argument("--pgqueuer-python", help="an interpreter with pgqueuer installed")
    parser.add_argument(
        "--only", default="", help="comma-separated labels' first words to run (default all)"
    )
    parser.add_argument(
        "--bulk",
        type=int,
        default=0,
        help="instead: one INSERT of this many rows per statement (per-row costs)",
    )
    opts = parser.parse_args()
    n1, n2 = (int(x) for x in opts.counts.split(","))
    prepare, execute = qe_statement()
    unit = "enqueue"
    if opts.bulk:
        prepare = (
            f"INSERT INTO {SCHEMA}.jobs (queue, task) SELECT $1, $2 FROM generate_series(1, $3)"
        )
        execute = f"'bench', 'noop', {opts.bulk}"
        unit = f"{opts.bulk}-row INSERT"
    print(f"server instructions per {unit} ({n2} - {n1} statements):\n")
    print(f"| variant | instructions per {unit} | WAL bytes per {unit} |")
    print("|---|---|---|")
    variants: list[tuple[str, str, str, str]] = [
        ("this build", "", prepare, execute),
        ("wake-up in its own statement trigger (before 0026)", downs(26), prepare, execute),
        ("rules as a CHECK calling jobs_row_ok (before 0017)", downs(17), prepare, execute),
        ("0015's jobs_row_ok, one expression (before 0016)", downs(17, 16), prepare, execute),
        ("twelve CHECK constraints (before 0015)", downs(17, 16, 15), prepare, execute),
        ("no row rules (no jobs_check_row trigger)", NO_RULES, prepare, execute),
    ]
    for extra in sorted((ROOT / "bench" / "sql").glob("enqueue_variant_*.sql")):
        ddl = extra.read_text().replace("__SCHEMA__", SCHEMA)
        variants.append((extra.stem.removeprefix("enqueue_variant_"), ddl, prepare, execute))
    if opts.pgqueuer_python and not opts.bulk:
        install, enqueue = pgqueuer_sql(opts.pgqueuer_python)
        enqueue = "\n".join(
            line for line in enqueue.splitlines() if line.strip() and "--" not in line
        )
        # Queries.enqueue("noop", None) as the harness calls it (args {} -> None).
        pgq_args = "'{0}'::int[], '{noop}'::text[], '{NULL}'::bytea[], '{0 s}'::interval[], "
        pgq_args += "'{NULL}'::text[], '{NULL}'::jsonb[]"
        variants.append(("pgqueuer 1.6 Queries.enqueue", install, enqueue, pgq_args))
    only = [w for w in opts.only.split(",") if w]
    for label, ddl, text, args in variants:
        if only and not any(label.startswith(w) for w in only):
            continue
        measure(label, ddl, text, args, n1, n2)


if __name__ == "__main__":
    main()
