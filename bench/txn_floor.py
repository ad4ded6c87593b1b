"""The per-job floor of a one-at-a-time worker, against the engine, in one run. Not a test.

Usage::

    python bench/txn_floor.py                  # embedded PostgreSQL, 1 and 4 clients, 3 rounds
    python bench/txn_floor.py --k 1,4 --jobs 20000 --rounds 5
    python bench/txn_floor.py --python           # + the psycopg and async-commit floors

A one-at-a-time worker that records each job's end durably needs at least one
commit per job, and the engine's finish-and-claim statement is exactly one.
So the cheapest such transaction, a bare claim (``UPDATE ... WHERE id =
(SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``) sent by ``pgbench``, a C
client, bounds what any one-at-a-time worker can reach on the server it runs
on: its rate and the server CPU it costs per transaction are the floor. The
claim is the shared harness's ``pgbench/claim.sql`` on its table (a partial
index on the claim predicate), and it records no finish at all.

``pgbench`` commits as initdb leaves it (``synchronous_commit`` on: each
claim waits for its WAL flush); the engine's worker commits with
``synchronous_commit`` off. ``--python`` adds the floors of a worker written
in Python with psycopg, as the engine's is, committing as the engine's does:

- ``bare claim (pgbench, async commit)``: the pgbench claim with
  ``synchronous_commit`` off (``PGOPTIONS``), the C client's floor for the
  engine's commit mode;
- ``bare claim (psycopg)``: K processes, each a loop of the same claim,
  prepared, on an autocommit connection with ``synchronous_commit`` off,
  calling a no-op function with the claimed row; no finish recorded;
- ``bare finish-and-claim (psycopg)``: the same loop, but each statement
  also marks the previous job succeeded (one UPDATE in a CTE), as the
  engine's statement does: the least a one-at-a-time Python worker that
  records each job's end can do per job, without events, retries, leases,
  gates or a guard.

Each round, per K, alternates: ``pgbench`` with K clients on a fresh database
of ``--jobs`` rows (then, with ``--python``, the three floors above, each on a
fresh database), then the engine's drain of ``--jobs`` no-op jobs with K
``queue-claim-worker`` processes (``worker_bench.drain``). Server CPU is the
postmaster's children's times (backends that exited are counted: the kernel
adds them to their parent when it reaps them) plus the live ones', before and
after. Prints medians: transactions or jobs per second and server CPU ms per
transaction or job.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from argparse import SUPPRESS
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import psycopg
from worker_bench import drain, fresh_database, server

from queue_engine.embedded import EmbeddedPostgres

SCHEMA = """
CREATE TABLE bench_jobs (
    id          bigserial PRIMARY KEY,
    status      text        NOT NULL DEFAULT 'queued',
    args        jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    claimed_at  timestamptz,
    finished_at timestamptz
);
CREATE INDEX bench_jobs_claimable ON bench_jobs (id) WHERE status = 'queued';
"""

CLAIM = """UPDATE bench_jobs
   SET status = 'running', claimed_at = now()
 WHERE id = (SELECT id FROM bench_jobs
              WHERE status = 'queued'
              ORDER BY id
              LIMIT 1
              FOR UPDATE SKIP LOCKED)
RETURNING id, args;
"""


#: The claim as one statement of a psycopg loop (the pgbench script ends with ";").
CLAIM_STATEMENT = CLAIM.rstrip().rstrip(";")
FINISH_AND_CLAIM = (
    """WITH finished AS (
    UPDATE bench_jobs SET status = 'succeeded', finished_at = now()
     WHERE id = %(previous)s AND status = 'running'
)
"""
    + CLAIM_STATEMENT
)


def server_cpu(conn: psycopg.Connection[tuple[object, ...]]) -> float:
    """CPU seconds of the server so far: the postmaster, its reaped children and live ones."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    postmaster = psutil.Process(int(str(row[0]))).parent()
    assert postmaster is not None
    t = postmaster.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in postmaster.children():
        try:
            c = child.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system
    return total


def bare_claims(
    admin: str, pgbench: Path, n: int, clients: int, script: Path, pgoptions: str = ""
) -> tuple[float, float]:
    """pgbench's bare claim, ``clients`` clients, ``n`` transactions: (tps, server CPU ms per txn).

    ``pgoptions``: session settings for pgbench's connections (``PGOPTIONS``).
    """
    with filled(admin, n) as (dsn, conn):
        before = server_cpu(conn)
        argv = [str(pgbench), "-n", "-f", str(script), "-c", str(clients), "-j", str(clients)]
        done = subprocess.run(
            [*argv, "-t", str(n // clients), dsn],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PGOPTIONS": pgoptions} if pgoptions else None,
        )
        time.sleep(0.2)  # the backends exit and are reaped: their CPU moves to the postmaster
        cpu = server_cpu(conn) - before
    tps = next(
        float(line.split("=")[1].split()[0])
        for line in done.stdout.splitlines()
        if line.startswith("tps =")
    )
    return tps, cpu / (n // clients * clients) * 1000


@contextmanager
def filled(admin: str, n: int) -> Iterator[tuple[str, psycopg.Connection[tuple[object, ...]]]]:
    """A fresh database holding ``n`` queued rows of ``bench_jobs``, vacuumed and checkpointed."""
    with fresh_database(admin) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA.encode())
        conn.execute(
            "INSERT INTO bench_jobs (args) SELECT '{}'::jsonb FROM generate_series(1, %s)", (n,)
        )
        conn.execute("VACUUM ANALYZE bench_jobs")
        conn.execute("CHECKPOINT")
        yield dsn, conn


def python_child(dsn: str, mode: str, go_at: str) -> None:
    """One psycopg worker loop until no row is left; prints its first and last claim times."""
    statement = FINISH_AND_CLAIM if mode == "finish" else CLAIM_STATEMENT
    handler = noop
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0) as conn:
        conn.execute("SET synchronous_commit = off")
        while time.time() < float(go_at):
            time.sleep(0.001)
        previous = 0
        first = time.time()
        while True:
            params = {"previous": previous} if mode == "finish" else None
            row = conn.execute(statement.encode(), params).fetchone()  # bench's own fixed SQL
            if row is None:
                break
            handler(row[1])
            previous = int(str(row[0]))
        print(first, time.time())


def noop(args: object) -> None:
    """The job: nothing, as the harness's no-op task."""


def python_claims(admin: str, n: int, k: int, mode: str) -> tuple[float, float]:
    """K psycopg loops drain ``n`` rows: (rows per second, server CPU ms per row)."""
    with filled(admin, n) as (dsn, conn):
        go_at = time.time() + 1.0  # every child connected and waiting before the first claim
        before = server_cpu(conn)
        children = [
            subprocess.Popen(
                [sys.executable, __file__, "--python-child", dsn, mode, repr(go_at)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(k)
        ]
        spans = [tuple(float(x) for x in c.communicate()[0].split()) for c in children]
        time.sleep(0.2)
        cpu = server_cpu(conn) - before
    start = min(span[0] for span in spans)
    end = max(span[1] for span in spans)
    return n / (end - start), cpu / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--k", default="1,4", help="clients / workers, comma list")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--python",
        action="store_true",
        help="add the floors of a psycopg worker and of pgbench with async commit",
    )
    parser.add_argument("--python-child", nargs=3, metavar=("DSN", "MODE", "GO_AT"), help=SUPPRESS)
    opts = parser.parse_args()
    if opts.python_child:
        python_child(*opts.python_child)
        return
    ks = [int(x) for x in opts.k.split(",") if x]
    located = EmbeddedPostgres(Path("unused"))  # only for its binaries' folder
    shutil.rmtree(located.socket_dir, ignore_errors=True)
    pgbench = located.bin_dir / "pgbench"
    rows: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with server("") as admin, tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "claim.sql"
        script.write_text(CLAIM)
        for r in range(opts.rounds):
            for k in ks:
                floor = bare_claims(admin, pgbench, opts.jobs, k, script)
                if opts.python:
                    floors = {
                        "bare claim (pgbench, async commit)": bare_claims(
                            admin, pgbench, opts.jobs, k, script, "-c synchronous_commit=off"
                        ),
                        "bare claim (psycopg)": python_claims(admin, opts.jobs, k, "claim"),
                        "bare finish-and-claim (psycopg)": python_claims(
                            admin, opts.jobs, k, "finish"
                        ),
                    }
                    for what, (rate, ms) in floors.items():
                        rows.setdefault((what, k), []).append((rate, ms))
                        print(
                            f"  round {r + 1} K={k}: {what} {rate:,.0f}/s {ms:.3f} ms",
                            file=sys.stderr,
                        )
                rate, server_ms, _ = drain(admin, opts.jobs, k, 1, {}, opts.timeout)
                rows.setdefault(("bare claim (pgbench)", k), []).append(floor)
                rows.setdefault(("queue-engine drain", k), []).append((rate, server_ms))
                print(
                    f"  round {r + 1} K={k}: bare claim {floor[0]:,.0f}/s {floor[1]:.3f} ms;"
                    f" engine {rate:,.0f}/s {server_ms:.3f} ms",
                    file=sys.stderr,
                )
    print(f"\nmedians of {opts.rounds} rounds, {opts.jobs:,} transactions or jobs each:\n")
    print("| what | K | per second | server CPU ms each |")
    print("|---|---|---|---|")
    for (what, k), values in sorted(rows.items(), key=lambda item: (item[0][1], item[0][0])):
        rate = statistics.median(v[0] for v in values)
        ms = statistics.median(v[1] for v in values)
        print(f"| {what} | {k} | {rate:,.0f} | {ms:.3f} |")


if __name__ == "__main__":
    main()
