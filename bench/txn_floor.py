"""The per-job floor of a one-at-a-time worker, against the engine, in one run. Not a test.

Usage::

    python bench/txn_floor.py                  # embedded PostgreSQL, 1 and 4 clients, 3 rounds
    python bench/txn_floor.py --k 1,4 --jobs 20000 --rounds 5

A one-at-a-time worker that records each job's end durably needs at least one
commit per job, and the engine's finish-and-claim statement is exactly one.
So the cheapest such transaction, a bare claim (``UPDATE ... WHERE id =
(SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``) sent by ``pgbench``, a C
client, bounds what any one-at-a-time worker can reach on the server it runs
on: its rate and the server CPU it costs per transaction are the floor. The
claim is the shared harness's ``pgbench/claim.sql`` on its table (a partial
index on the claim predicate), and it records no finish at all.

Each round, per K, alternates: ``pgbench`` with K clients on a fresh database
of ``--jobs`` rows, then the engine's drain of ``--jobs`` no-op jobs with K
``queue-claim-worker`` processes (``worker_bench.drain``). Server CPU is the
postmaster's children's times (backends that exited are counted: the kernel
adds them to their parent when it reaps them) plus the live ones', before and
after. Prints medians: transactions or jobs per second and server CPU ms per
transaction or job.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
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
    claimed_at  timestamptz
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
    admin: str, pgbench: Path, n: int, clients: int, script: Path
) -> tuple[float, float]:
    """pgbench's bare claim, ``clients`` clients, ``n`` transactions: (tps, server CPU ms per txn)."""
    with fresh_database(admin) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA.encode())
        conn.execute(
            "INSERT INTO bench_jobs (args) SELECT '{}'::jsonb FROM generate_series(1, %s)", (n,)
        )
        conn.execute("VACUUM ANALYZE bench_jobs")
        conn.execute("CHECKPOINT")
        before = server_cpu(conn)
        argv = [str(pgbench), "-n", "-f", str(script), "-c", str(clients), "-j", str(clients)]
        done = subprocess.run(
            [*argv, "-t", str(n // clients), dsn], capture_output=True, text=True, check=True
        )
        time.sleep(0.2)  # the backends exit and are reaped: their CPU moves to the postmaster
        cpu = server_cpu(conn) - before
    tps = next(
        float(line.split("=")[1].split()[0])
        for line in done.stdout.splitlines()
        if line.startswith("tps =")
    )
    return tps, cpu / (n // clients * clients) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--k", default="1,4", help="clients / workers, comma list")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    opts = parser.parse_args()
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
