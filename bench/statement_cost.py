"""Server instructions per finish-and-claim statement, counted by valgrind. Not a test.

Usage::

    python bench/statement_cost.py                 # 300 and 900 statements per variant
    python bench/statement_cost.py --idle          # the idle worker's claim, part by part

Time per statement moves with the machine's load; instructions do not. For
each variant of the worker's statement, ``lib.callgrind`` makes a data folder
(migrations, queued no-op jobs, the variant's DDL), and runs PostgreSQL in
single-user mode under callgrind on the worker's session settings and the
statement PREPAREd and EXECUTEd N times, each finishing the job the one before
claimed and claiming the next, as a worker with prefetch 1 does (each EXECUTE
its own transaction, commit included). Runs of N1 and N2 statements: the
difference over N2 - N1 is one statement's instructions and WAL bytes.

``--prefetch P``: each statement finishes P jobs and claims P (divide by P
for a job's share). Variants: this build; its batch form (without the one-job
tags); older schemas by their migrations' down SQL: the row rules as a CHECK
(before 0017), the twelve CHECKs of jobs (before 0015), the guard function on
every status change (before 0011); the statement without its ``claim_events``
insert (no 'claimed' event row); the status guard without the rate limits'
spend (the guard from 0033's down file).

``--base-sql FILE --base-downs N[,N]``: one more variant, another build's
``finish_and_claim_jobs.sql`` on this schema without migrations N (their
down SQL, newest first): the build before a migration that changed the claim,
e.g. ``--base-downs 32`` with the statement of the build before 0032.

``--enqueue``: the single plain enqueue (``enqueue_plain.sql``, each EXECUTE
its own transaction) on this schema, on the schema without 0032 (the row
rules' fair-tag branch and the claim index's extra column), and with a
partition key (what the fair tag costs a partitioned job).

``--idle``: the claim an idle worker sends when woken (nothing to finish,
``claimonly`` + ``oneclaim``; each EXECUTE claims one job), with one part
knocked out at a time, and a bare ``UPDATE ... SKIP LOCKED`` of ``jobs``:
what each part of that statement costs (none of the knock-outs is a
shippable statement; see ``cold_claim.py`` for the same claim in time).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from lib.callgrind import per_statement, single_user_input
from lib.report import table
from lib.statements import (
    BARE_CLAIM,
    WORKER_SESSION,
    downs,
    execute,
    knocked_out,
    statement,
    succeeded,
    without_claim_event,
)

from queue_engine.foundation import sql as queries
from queue_engine.foundation.sql import compiler
from queue_engine.worker import store


def guard_before(version: int) -> str:
    """The status guard's CREATE OR REPLACE from migration ``version``'s down file, alone."""
    text = downs(version)
    start = text.index("CREATE OR REPLACE FUNCTION")
    return text[start : text.index("\n$$;", start) + 4]


def variants(
    prefetch: int = 1, base_sql: str = "", base_downs: tuple[int, ...] = ()
) -> dict[str, tuple[compiler.RawStatement, str]]:
    """Label -> (statement, DDL applied to its data folder first).

    "this build" is the statement a worker with this ``prefetch`` sends at
    steady state (its size tags: ``onefinish`` and ``oneclaim`` at prefetch 1);
    "batch form" the same build's statement without them, which a prefetch-1
    worker sent before they existed.
    """
    worker = statement(store.worker_tags(prefetch, prefetch))
    base: dict[str, tuple[compiler.RawStatement, str]] = {}
    if base_sql:
        label = f"--base-sql without {', '.join(f'{v:04d}' for v in base_downs)}"
        base[label] = (
            statement(store.worker_tags(prefetch, prefetch), base_sql),
            downs(*base_downs),
        )
    return {
        **base,
        "this build": (worker, ""),
        "batch form (no one-job tags)": (statement(("cold",)), ""),
        "rules as a CHECK on every row written (before 0017)": (worker, downs(17)),
        "twelve CHECKs (before 0015)": (worker, downs(17, 16, 15)),
        "guard function on every change (before 0011)": (worker, downs(17, 11)),
        "no 'claimed' event row": (without_claim_event(worker), ""),
        # The rate limits' spend (0033) in the status guard: a plain job's
        # claim and finish pay one NULL test; 0020's guard has none.
        "guard without the rate spend (before 0033)": (worker, guard_before(33)),
    }


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


def enqueue_variants() -> dict[str, tuple[compiler.RawStatement, str]]:
    """The single plain enqueue: label -> (statement, DDL)."""
    plain = compiler.compile_statement(
        queries.query("enqueue_plain", "queue_engine"), "enqueue_plain.sql"
    )
    return {
        "plain enqueue, this build": (plain, ""),
        "plain enqueue, schema without 0032": (plain, downs(32)),
        "enqueue with a partition key, this build": (
            compiler.RawStatement(plain.text, (*plain.names, "+partition")),
            "",
        ),
    }


def enqueue_script(statement: compiler.RawStatement, n: int) -> str:
    """Single-user input: PREPARE the enqueue, then N EXECUTEs (each a transaction)."""
    partition = "'tenant'" if "+partition" in statement.names else "NULL"
    values = {"queue": "'bench'", "task": "'noop'", "args": "'{}'", "priority": "100"}
    values |= {"max_attempts": "5", "partition_key": partition}
    names = [name for name in statement.names if name != "+partition"]
    args = ", ".join(values.get(name, "NULL") for name in names)
    # A producer's session: the server's defaults but the commit's wait.
    lines = [WORKER_SESSION[0], f"PREPARE e AS {statement.text};"]
    lines += [f"EXECUTE e({args});"] * n
    return single_user_input(lines)


def script(text: str, names: tuple[str, ...], n: int, prefetch: int = 1) -> str:
    """Single-user input: PREPARE, then N EXECUTEs.

    Statement i claims ``prefetch`` jobs and finishes the ``prefetch`` the one
    before claimed (ids in claim order: the jobs were enqueued in id order).
    """
    lines = [*WORKER_SESSION, f"PREPARE fc AS {text};"]
    for i in range(1, n + 1):
        outcome = (
            []
            if i == 1
            else [succeeded(job) for job in range((i - 2) * prefetch + 1, (i - 1) * prefetch + 1)]
        )
        lines.append(execute("fc", names, outcome, claim_limit=prefetch))
    return single_user_input(lines)


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
    parser.add_argument("--enqueue", action="store_true", help="the single plain enqueue")
    parser.add_argument("--base-sql", default="", help="another build's finish_and_claim_jobs.sql")
    parser.add_argument(
        "--base-downs", default="", help="N[,N]: the migrations --base-sql's schema lacks"
    )
    opts = parser.parse_args()
    p = 1 if opts.idle else opts.prefetch
    n1, n2 = (int(x) for x in opts.counts.split(","))
    what = "idle claim" if opts.idle else "finish-and-claim statement"
    if opts.enqueue:
        what = "single enqueue"
    print(f"server instructions per {what} ({n2} - {n1} statements, prefetch {p}):\n")
    base_downs = tuple(int(v) for v in opts.base_downs.split(",") if v)
    chosen = idle_variants() if opts.idle else variants(p, opts.base_sql, base_downs)
    if opts.enqueue:
        chosen = enqueue_variants()

    def rows() -> Iterator[list[str]]:
        for label, (worker, ddl) in chosen.items():
            if not any(part in label for part in opts.only.split(",")):
                continue

            def input_for(_pg: object, n: int, worker: compiler.RawStatement = worker) -> str:
                if opts.enqueue:
                    return enqueue_script(worker, n)
                return script(worker.text, worker.names, n, p)

            per, wal = per_statement(label, (n1, n2), ddl, (n2 + 10) * p, input_for)
            yield [label, f"{per:,.0f}", f"{wal:,.0f}"]

    table(["variant", "instructions per statement", "WAL bytes per statement"], rows())


if __name__ == "__main__":
    main()
