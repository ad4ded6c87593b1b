"""Server instructions per finish-and-claim statement, counted by valgrind. Not a test.

Usage::

    python bench/statement_cost.py                 # 300 and 900 statements per variant

On a shared machine, time per statement moves with everyone else's load;
instructions do not. For each variant of the worker's statement this script
makes a data folder (initdb, migrations, ``--jobs`` queued no-op jobs, the
variant's DDL, ANALYZE, CHECKPOINT), stops the server, and runs PostgreSQL in
single-user mode under ``valgrind --tool=callgrind`` on a script that sets
the worker's session settings (asynchronous commit, generic plans), PREPAREs
the statement and EXECUTEs it N times, each finishing the job the previous
one claimed and claiming the next, as a worker with prefetch 1 does (each
EXECUTE is its own transaction, commit included). Two runs (N1 and N2
statements) per variant: the difference of their totals over N2 - N1 is one
statement's instructions, start-up and PREPARE cancelling out. It also reports
the WAL one statement writes (``pg_current_wal_lsn`` before and after the
run, over N2). Single-user mode runs no autovacuum, WAL writer or
checkpointer: this is the backend's own cost of the statement.

``--prefetch P``: each statement finishes P jobs and claims P (divide by P
for a job's share). Variants: this build; the twelve CHECKs of jobs as before
migration 0015 (its down SQL applied); the guard trigger as before migration 0011 (its
function called on every status change); the statement without its
``claim_events`` insert (no 'claimed' event row).

``--idle``: the claim an idle worker sends when woken (nothing to finish,
``claimonly`` + ``oneclaim``; each EXECUTE claims one job), with one part
knocked out at a time, and a bare ``UPDATE ... SKIP LOCKED`` of ``jobs``:
what each part of that statement costs (none of the knock-outs is a
shippable statement; see ``cold_claim.py`` for the same claim in time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import psycopg

from queue_engine import Client
from queue_engine import sql as queries
from queue_engine.embedded import EmbeddedPostgres
from queue_engine.migrate import Migrator
from queue_engine.sql import compiler
from queue_engine.worker import store

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "bench"


def downs(*versions: int) -> str:
    """The down SQL of these migrations, in this order (an older build's parts, as DDL)."""
    texts = []
    for version in versions:
        (path,) = (ROOT / "migrations").glob(f"{version:04d}_*.down.sql")
        texts.append(path.read_text().replace("__SCHEMA__", "queue_engine"))
    return "\n".join(texts)


def statement(tags: tuple[str, ...], sql_file: str | None = None) -> compiler.RawStatement:
    """The ``tags`` form of the worker's statement: this build's, or that of a
    candidate text of ``finish_and_claim_jobs.sql`` (another build's, say)."""
    if sql_file is None:
        return compiler.raw_statement("finish_and_claim_jobs", "queue_engine", tags)
    text = queries.render(Path(sql_file).read_text(), "queue_engine")
    return compiler.compile_statement(compiler.select_variant(text, tags), sql_file)


def without_claim_event(worker: compiler.RawStatement) -> compiler.RawStatement:
    """The statement without its ``claim_events`` CTE (the last one): a knock-out."""
    return knocked_out(worker, ", claim_events AS (", " SELECT true AS is_claim", "")


def variants(prefetch: int = 1) -> dict[str, tuple[compiler.RawStatement, str]]:
    """Label -> (statement, DDL applied to its data folder first).

    "this build" is the statement a worker with this ``prefetch`` sends at
    steady state (its size tags: ``onefinish`` and ``oneclaim`` at prefetch 1);
    "batch form" the same build's statement without them, which a prefetch-1
    worker sent before they existed.
    """
    worker = statement(store.worker_tags(prefetch, prefetch))
    batch = statement(("cold",))
    no_event = without_claim_event(worker)
    return {
        "this build": (worker, ""),
        "batch form (no one-job tags)": (batch, ""),
        "rules as a CHECK on every row written (before 0017)": (worker, downs(17)),
        "twelve CHECKs (before 0015)": (worker, downs(17, 16, 15)),
        "guard function on every change (before 0011)": (worker, downs(17, 11)),
        "no 'claimed' event row": (no_event, ""),
    }


#: A claim with nothing but the claim: the floor of ``idle_variants`` on the same table.
BARE_CLAIM = (
    "UPDATE \"queue_engine\".jobs j SET status = 'running', attempt = j.attempt + 1,"
    " claimed_by = $1, started_at = now(), heartbeat_at = now(),"
    " lease_expires_at = now() + interval '60 s'"
    ' WHERE j.id = (SELECT c.id FROM "queue_engine".jobs c WHERE c.queue = $2'
    " AND c.status = 'queued' AND c.available_at <= now()"
    " ORDER BY c.priority, c.available_at, c.id LIMIT 1 FOR UPDATE SKIP LOCKED)"
    " RETURNING j.id, j.attempt, j.task, j.args"
)


def knocked_out(
    statement: compiler.RawStatement, start: str, end: str, instead: str
) -> compiler.RawStatement:
    """``statement`` with the text from ``start`` up to (not including) ``end`` replaced."""
    text = statement.text
    first = text.index(start)
    last = text.index(end, first) if end else len(text)
    return compiler.RawStatement(text[:first] + instead + text[last:], statement.names)


def idle_variants() -> dict[str, tuple[compiler.RawStatement, str]]:
    """The idle worker's claim and its knock-outs (label -> statement, DDL)."""
    idle = statement(store.worker_tags(0, 1))
    # The gate's probes of queues and worker_parks, without changing the parameters used.
    no_probes = "gate AS ( SELECT false AS rated WHERE $2 > 0 AND $3::int IS NULL AND $5::text IS NOT NULL ), "
    return {
        "idle claim (claimonly, oneclaim)": (idle, ""),
        "without the 'claimed' event row": (without_claim_event(idle), ""),
        "without the workflow parents column": (
            knocked_out(idle, "CASE WHEN j.workflow_id IS NULL", " AS parents", "NULL::json"),
            "",
        ),
        "without the answer's throttle branch": (
            knocked_out(idle, " UNION ALL SELECT NULL", "", ""),
            "",
        ),
        "without the lock-key check": (
            knocked_out(
                idle, " AND (j.lock_key IS NULL OR", " AND EXISTS (SELECT 1 FROM gate)", ""
            ),
            "",
        ),
        "without the gate's probes": (
            knocked_out(idle, "gate AS (", "candidate AS (", no_probes),
            "",
        ),
        "a bare UPDATE ... SKIP LOCKED of jobs": (
            compiler.RawStatement(BARE_CLAIM, ("worker_id", "queue")),
            "",
        ),
    }


def succeeded(job_id: int) -> dict[str, object]:
    """The worker's outcome of a first attempt that succeeded (as store.outcomes_json writes it)."""
    return {
        "id": job_id,
        "attempt": 1,
        "status": "succeeded",
        "kind": "succeeded",
        "refund": 0,
        "delay_s": 0.0,
        "duration_ms": 0,
    }


def execute(
    name: str, names: tuple[str, ...], outcomes: list[dict[str, object]], claim_limit: int = 1
) -> str:
    """``EXECUTE name(...)`` with the worker's parameters, in the statement's order."""
    params = {
        "outcomes": f"'{json.dumps(outcomes)}'",
        "worker_id": "'w'",
        "queue": f"'{QUEUE}'",
        "claim_limit": str(claim_limit),
        "lease_ttl_s": "60",
        "jobs_channel": "'queue_engine.jobs'",
        "host": "'h'",
        "slot": "NULL",
        "affinity_wait_s": "30.0",
        "followups": "'[]'",
    }
    return f"EXECUTE {name}({', '.join(params[n] for n in names)});"


def script(text: str, names: tuple[str, ...], n: int, prefetch: int = 1) -> str:
    """Single-user input (``-j``: statements end with a semicolon and a blank line).

    Statement i claims ``prefetch`` jobs and finishes the ``prefetch`` the one
    before claimed (ids in claim order: the jobs were enqueued in id order).
    """
    lines = [
        "SET synchronous_commit = off;",
        "SET plan_cache_mode = force_generic_plan;",
        "SET enable_seqscan = off;",
        f"PREPARE fc AS {text};",
    ]
    for i in range(1, n + 1):
        outcome = (
            []
            if i == 1
            else [succeeded(job) for job in range((i - 2) * prefetch + 1, (i - 1) * prefetch + 1)]
        )
        lines.append(execute("fc", names, outcome, claim_limit=prefetch))
    lines.append("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn AS wal_end;")
    return "\n\n".join(lines) + "\n"


def enqueue_plain(dsn: str, jobs: int) -> None:
    """``jobs`` queued no-op jobs in the bench queue."""
    with Client(dsn) as client:
        for start in range(0, jobs, 1000):
            client.enqueue_many(
                [{"task": "noop", "queue": QUEUE} for _ in range(min(1000, jobs - start))]
            )


def prepare_folder(
    folder: Path, ddl: str, jobs: int, load: Callable[[str, int], None] = enqueue_plain
) -> tuple[EmbeddedPostgres, int]:
    """A data folder holding the migrated database, loaded by ``load``; server stopped.

    ``load(dsn, jobs)``: by default ``jobs`` queued no-op jobs.
    """
    pg = EmbeddedPostgres(folder / "data")
    dsn = pg.start()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE qe_stmt")
    dsn = pg.dsn("qe_stmt")
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
    """Run single-user PostgreSQL under callgrind; (instructions, WAL position at the end)."""
    cg_out = out_dir / f"callgrind.{os.urandom(4).hex()}"
    argv = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={cg_out}",
        str(pg.bin_dir / "postgres"),
        "--single",
        "-j",
        "-D",
        str(pg.data_dir),
        "qe_stmt",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="300,900", help="N1,N2 statements")
    parser.add_argument("--prefetch", type=int, default=1, help="jobs claimed per statement")
    parser.add_argument(
        "--only",
        default="",
        help="run only the variants whose label has one of these (comma-separated)",
    )
    parser.add_argument("--idle", action="store_true", help="the idle claim and its knock-outs")
    opts = parser.parse_args()
    p = 1 if opts.idle else opts.prefetch
    n1, n2 = (int(x) for x in opts.counts.split(","))
    what = "idle claim" if opts.idle else "finish-and-claim statement"
    print(f"server instructions per {what} ({n2} - {n1} statements, prefetch {p}):\n")
    print("| variant | instructions per statement | WAL bytes per statement |")
    print("|---|---|---|")
    chosen = idle_variants() if opts.idle else variants(p)
    for label, (statement, ddl) in chosen.items():
        if not any(part in label for part in opts.only.split(",")):
            continue
        counts: list[tuple[int, int]] = []
        for n in (n1, n2):
            folder = Path(tempfile.mkdtemp(prefix="qe-stmtcost-"))
            folder.chmod(0o777)
            try:
                pg, wal_start = prepare_folder(folder, ddl, (n2 + 10) * p)
                try:
                    instructions, wal_end = run_single(
                        pg, script(statement.text, statement.names, n, p), folder
                    )
                finally:
                    shutil.rmtree(pg.socket_dir, ignore_errors=True)
                counts.append((instructions, wal_end - wal_start))
                print(
                    f"  {label} N={n}: {instructions:,} instructions, WAL {wal_start:,} -> {wal_end:,}",
                    file=sys.stderr,
                )
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        per = (counts[1][0] - counts[0][0]) / (n2 - n1)
        wal = (counts[1][1] - counts[0][1]) / (n2 - n1)
        print(f"| {label} | {per:,.0f} | {wal:,.0f} |")


if __name__ == "__main__":
    main()
