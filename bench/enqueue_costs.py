"""Where the time of one enqueue goes, and an A/B of two builds. Not a test: it prints numbers.

Usage::

    python bench/enqueue_costs.py --breakdown            # this build, the cost of each part
    python bench/enqueue_costs.py --ab ../base/.venv/bin/python --rounds 3
    python bench/enqueue_costs.py --callgrind [--ab ../base/.venv/bin/python]

``--breakdown`` runs, on one embedded server (fsync on, pg_stat_statements),
the producer's enqueue and its parts one after another, ``--n`` calls each:
the client as the shared harness calls it (``Client(dsn).enqueue``, one
transaction each), the same on a caller's autocommit connection, the bare
statement through psycopg (no validation, no Job), the bare statement with
the row trigger disabled (``jobs_check_row``: since migration 0026 it sends
the wake-up as well as checking the rules), a ``SELECT 1`` round trip (the floor of any
round trip), the Python alone (validation + statement + Job, no I/O), and the
pool's checkout/return alone. Per call it reports wall time, the producer's
CPU, the CPU of the server backend that ran the statements, WAL bytes, the
statements the server ran per call (pg_stat_statements, nested ones
included: a BEGIN/COMMIT/SET/SELECT 1 of a pool check would show here), and
the row trigger function's own time (pg_stat_user_functions).

``--callgrind`` counts the producer's own instructions per single enqueue
(``valgrind --tool=callgrind`` on the producer process, the server started
apart, each thread counted: the pool's threads too): two runs of N1 and N2
calls after the same warm-up, the difference over N2 - N1, so start-up and
imports cancel out. Blind to load and to the disk, it is the figure for the
client's Python; with ``--ab PYTHON`` the base build is counted beside this
one. Calls as the shared harness makes them: ``args={}`` (its single-enqueue
scenario) and ``args={"t": time.time()}`` (its latency scenario); and
``AsyncClient``'s with ``args={}`` (the asyncio loop counted too).

``--ab PYTHON`` alternates, round by round, this build and the build whose
interpreter is PYTHON (a venv of the base commit): each measurement is a
child process of that interpreter, on a fresh database migrated by that
build, so a changed migration is compared too. Figures: single enqueue (one
transaction each) and bulk enqueue (``enqueue_many`` in calls of 1,000), with
the child's CPU and the server backend's CPU per job next to wall-clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
from worker_bench import callgrind_total  # noqa: E402  (a sibling script, not a package)

QUEUE = "bench"


# -- the child: one measurement with whichever queue_engine its interpreter has ---------------


def backend_cpu(pid: int) -> float:
    """User + system CPU seconds of one server backend."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def child(mode: str, dsn: str, n: int) -> dict[str, float]:
    """Migrate ``dsn`` with this build, then time ``n`` jobs enqueued in ``mode``."""
    from queue_engine import Client
    from queue_engine.migrate import Migrator

    Migrator(dsn).up()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("CHECKPOINT")
        lsn0 = admin.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        with Client(dsn, pool_size=1) as client:
            client.list(limit=1)  # open the pool outside the timed part
            with client._connection(None) as pooled:
                backend = pooled.info.backend_pid
            s0, c0, t0 = backend_cpu(backend), time.process_time(), time.perf_counter()
            if mode == "single":
                for _ in range(n):
                    client.enqueue("noop", queue=QUEUE, args={})
            else:
                for start in range(0, n, 1000):
                    items = [
                        {"task": "noop", "queue": QUEUE, "args": {}}
                        for _ in range(min(1000, n - start))
                    ]
                    client.enqueue_many(items)
            t1, c1, s1 = time.perf_counter(), time.process_time(), backend_cpu(backend)
        wal = admin.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn0,)).fetchone()
        count = admin.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0]
    assert count == n, (count, n)
    return {
        "rate": n / (t1 - t0),
        "client_us": 1e6 * (c1 - c0) / n,
        "server_us": 1e6 * (s1 - s0) / n,
        "wal_bytes": float(wal[0]) / n,
    }


def count_child(args_kind: str, dsn: str, n: int) -> None:
    """Enqueue ``n`` jobs after a warm-up, nothing else: the body that callgrind counts."""
    from queue_engine import AsyncClient, Client

    if args_kind == "async":

        async def enqueue_all() -> None:
            async with AsyncClient(dsn) as client:
                for _ in range(50 + n):
                    await client.enqueue("noop", queue=QUEUE, args={})

        asyncio.run(enqueue_all())
        return
    with Client(dsn) as client:
        for _ in range(50):
            client.enqueue("noop", queue=QUEUE, args={})
        if args_kind == "empty":
            for _ in range(n):
                client.enqueue("noop", queue=QUEUE, args={})
        else:
            for _ in range(n):
                client.enqueue("noop", queue=QUEUE, args={"t": time.time()})


def callgrind(builds: dict[str, str], counts: tuple[int, int]) -> int:
    """Producer instructions per single enqueue of each build (see the module docstring)."""
    print(f"producer instructions per single enqueue (callgrind, {counts[1]} - {counts[0]} calls):")
    with embedded(preload=False) as (admin, _pid):
        for args_kind in ("empty", "t", "async"):
            for build, python in builds.items():
                totals = []
                for n in counts:
                    with fresh_database(admin, f"cg_{build}") as dsn:
                        subprocess.run(
                            [
                                python,
                                "-c",
                                f"from queue_engine.migrate import Migrator; Migrator({dsn!r}).up()",
                            ],
                            check=True,
                        )
                        out_dir = Path(tempfile.mkdtemp(prefix="qe-enq-cg-"))
                        done = subprocess.run(
                            [
                                *("valgrind", "--tool=callgrind"),
                                f"--callgrind-out-file={out_dir}/cg.out",
                                *(python, str(HERE), "--child", f"count-{args_kind}"),
                                *("--dsn", dsn, "--n", str(n)),
                            ],
                            capture_output=True,
                            text=True,
                            check=False,
                        )
                        found = callgrind_total([out_dir / "cg.out"])
                        shutil.rmtree(out_dir, ignore_errors=True)
                        if done.returncode != 0 or found is None:
                            print(done.stderr[-2000:], file=sys.stderr)
                            raise SystemExit(f"callgrind of {build} reported no count")
                        totals.append(found)
                per_call = (totals[1] - totals[0]) / (counts[1] - counts[0])
                label = {
                    "empty": "args={}",
                    "t": 'args={"t": time.time()}',
                    "async": "AsyncClient, args={}",
                }[args_kind]
                print(f"  {build:<4} {label:<24} {per_call:>9,.0f}", flush=True)
    return 0


# -- the parent: servers, databases, rounds -------------------------------------------------


@contextmanager
def embedded(preload: bool) -> Iterator[tuple[str, int]]:
    """An embedded server with default (durable) settings; yields (admin DSN, postmaster pid)."""
    from queue_engine.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="qe-enq-costs-"))
    settings = {"track_functions": "pl"}
    if preload:
        settings |= {
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.track": "all",
        }
    pg = EmbeddedPostgres(folder / "data", settings=settings)
    admin = pg.start()
    try:
        pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
        yield admin, pid
    finally:
        pg.destroy()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def fresh_database(admin: str, name: str) -> Iterator[str]:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(admin, dbname=name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def machine_busy() -> Callable[[], float]:
    """Start a CPU sample; the returned function gives busy cores since then."""
    t0 = psutil.cpu_times()
    w0 = time.monotonic()

    def stop() -> float:
        t1 = psutil.cpu_times()
        busy = sum(
            getattr(t1, f) - getattr(t0, f)
            for f in ("user", "system", "nice", "irq", "softirq", "steal")
        )
        return busy / (time.monotonic() - w0)

    return stop


def ab(base_python: str, rounds: int, n_single: int, n_bulk: int) -> int:
    builds = {"base": base_python, "new": sys.executable}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with embedded(preload=False) as (admin, _pid):
        for rnd in range(1, rounds + 1):
            for mode, n in (("single", n_single), ("bulk", n_bulk)):
                order = ["base", "new"] if rnd % 2 else ["new", "base"]
                for build in order:
                    with fresh_database(admin, f"ab_{build}_{mode}") as dsn:
                        busy = machine_busy()
                        out = subprocess.run(
                            [
                                builds[build],
                                str(HERE),
                                "--child",
                                mode,
                                "--dsn",
                                dsn,
                                "--n",
                                str(n),
                            ],
                            check=True,
                            capture_output=True,
                            text=True,
                        )
                        result = json.loads(out.stdout.strip().splitlines()[-1])
                        result["machine_busy_cores"] = busy()
                    results.setdefault((mode, build), []).append(result)
                    print(
                        f"round {rnd} {mode:<6} {build:<4} {result['rate']:>8,.0f} jobs/s  "
                        f"client {result['client_us']:6.1f} us/job  server "
                        f"{result['server_us']:6.1f} us/job  WAL {result['wal_bytes']:5.0f} "
                        f"B/job  machine busy {result['machine_busy_cores']:.2f} cores",
                        flush=True,
                    )
    print()
    print(
        "| figure | build | jobs/s (median) | rounds | client CPU us/job | server CPU us/job "
        "| WAL B/job |"
    )
    print("|---|---|---|---|---|---|---|")
    for mode in ("single", "bulk"):
        for build in ("base", "new"):
            rs = results[(mode, build)]
            med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            each = " / ".join(f"{r['rate']:,.0f}" for r in rs)
            print(
                f"| {mode} | {build} | {med['rate']:,.0f} | {each} | {med['client_us']:.1f} | "
                f"{med['server_us']:.1f} | {med['wal_bytes']:.0f} |"
            )
        base = statistics.median(r["rate"] for r in results[(mode, "base")])
        new = statistics.median(r["rate"] for r in results[(mode, "new")])
        print(f"| {mode} | new / base | {new / base:.2f}x | | | | |")
    return 0


# -- the breakdown --------------------------------------------------------------------------


def breakdown(n: int, rounds: int) -> int:
    from psycopg.rows import dict_row

    from queue_engine import Client
    from queue_engine import operations as ops
    from queue_engine.jobs import Job
    from queue_engine.migrate import Migrator

    spec = ops.job_spec("noop", queue=QUEUE, args={})
    statement = ops.enqueue_statement("queue_engine", spec)
    keyed = ops.enqueue_statement(
        "queue_engine", ops.job_spec("noop", queue=QUEUE, args={}, idempotency_key="k")
    )

    with embedded(preload=True) as (admin, _pid), fresh_database(admin, "costs") as dsn:
        Migrator(dsn).up()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        row = None
        with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor(row_factory=dict_row) as c:
            row = c.execute(keyed.query, keyed.params).fetchone()
        assert row is not None
        whole_row: dict[str, Any] = row

        def harness(pool_client: Client, _conn: psycopg.Connection[Any], k: int) -> None:
            for _ in range(k):
                pool_client.enqueue("noop", queue=QUEUE, args={})

        def on_conn(_c: Client, conn: psycopg.Connection[Any], k: int) -> None:
            client = Client(conn=conn)
            for _ in range(k):
                client.enqueue("noop", queue=QUEUE, args={})

        def bare(_c: Client, conn: psycopg.Connection[Any], k: int) -> None:
            for _ in range(k):
                conn.execute(statement.query, statement.params, prepare=True).fetchone()

        def bare_whole_row(_c: Client, conn: psycopg.Connection[Any], k: int) -> None:
            query = statement.query.replace(
                "RETURNING id, available_at, created_at", "RETURNING *, true AS created"
            )
            with conn.cursor(row_factory=dict_row) as cur:
                for _ in range(k):
                    Job.from_row(
                        cur.execute(query, statement.params, prepare=True).fetchone() or {}
                    )

        def round_trip(_c: Client, conn: psycopg.Connection[Any], k: int) -> None:
            for _ in range(k):
                conn.execute("SELECT 1", prepare=True).fetchone()

        def python_only(_c: Client, _conn: psycopg.Connection[Any], k: int) -> None:
            for _ in range(k):
                s = ops.job_spec("noop", queue=QUEUE, args={})
                ops.enqueue_statement("queue_engine", s)
                ops.inserted_job(s, (1, whole_row["available_at"], whole_row["created_at"]))

        def python_whole_row(_c: Client, _conn: psycopg.Connection[Any], k: int) -> None:
            for _ in range(k):
                s = ops.job_spec("noop", queue=QUEUE, args={})
                ops.enqueue_statement("queue_engine", s)
                Job.from_row(whole_row)

        def pool_only(pool_client: Client, _conn: psycopg.Connection[Any], k: int) -> None:
            for _ in range(k):
                with pool_client._connection(None):
                    pass

        parts: list[tuple[str, Callable[[Client, psycopg.Connection[Any], int], None], str]] = [
            ("Client(dsn).enqueue (as the harness calls it)", harness, "pool"),
            ("Client(conn=autocommit).enqueue", on_conn, "conn"),
            ("bare INSERT via psycopg (no validation, no Job)", bare, "conn"),
            ("bare INSERT, RETURNING * + Job.from_row", bare_whole_row, "conn"),
            ("bare INSERT, row trigger disabled", bare, "conn-notrigger"),
            ("SELECT 1 round trip", round_trip, "conn"),
            ("Python only: validate + statement + Job", python_only, "conn"),
            ("Python only, Job.from_row of the whole row", python_whole_row, "conn"),
            ("pool checkout + return only", pool_only, "pool"),
        ]
        table: dict[str, list[dict[str, float]]] = {}
        with psycopg.connect(dsn, autocommit=True) as admin_conn, Client(dsn, pool_size=1) as pc:
            pc.list(limit=1)
            with pc._connection(None) as pooled:
                pool_backend = pooled.info.backend_pid
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn_backend = conn.info.backend_pid
                for _ in range(rounds):
                    for label, fn, where in parts:
                        if where == "conn-notrigger":
                            admin_conn.execute(
                                "ALTER TABLE queue_engine.jobs DISABLE TRIGGER jobs_check_row"
                            )
                        backend = pool_backend if where == "pool" else conn_backend
                        fn(pc, conn, 200)  # warm: prepared statements, caches
                        admin_conn.execute("CHECKPOINT")
                        admin_conn.execute("SELECT pg_stat_statements_reset()")
                        admin_conn.execute("SELECT pg_stat_reset()")
                        lsn0 = admin_conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
                        busy = machine_busy()
                        s0, c0, t0 = backend_cpu(backend), time.process_time(), time.perf_counter()
                        fn(pc, conn, n)
                        t1, c1, s1 = time.perf_counter(), time.process_time(), backend_cpu(backend)
                        cores = busy()
                        wal = admin_conn.execute(
                            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn0,)
                        ).fetchone()[0]
                        calls = admin_conn.execute(
                            "SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0)"
                            " FROM pg_stat_statements WHERE query NOT LIKE '%%pg_stat%%'"
                            " AND query NOT LIKE '%%pg_current_wal_lsn%%'"
                        ).fetchone()
                        top = admin_conn.execute(
                            "SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0)"
                            " FROM pg_stat_statements WHERE toplevel"
                            " AND query NOT LIKE '%%pg_stat%%'"
                            " AND query NOT LIKE '%%pg_current_wal_lsn%%'"
                        ).fetchone()
                        time.sleep(0.6)  # function stats are flushed at most every 500 ms
                        trig = admin_conn.execute(
                            "SELECT coalesce(sum(self_time), 0) FROM pg_stat_user_functions"
                            " WHERE funcname = 'jobs_row_rules'"
                        ).fetchone()[0]
                        if where == "conn-notrigger":
                            admin_conn.execute(
                                "ALTER TABLE queue_engine.jobs ENABLE TRIGGER jobs_check_row"
                            )
                        table.setdefault(label, []).append(
                            {
                                "wall": 1e6 * (t1 - t0) / n,
                                "client": 1e6 * (c1 - c0) / n,
                                "server": 1e6 * (s1 - s0) / n,
                                "wal": float(wal) / n,
                                "statements": float(calls[0]) / n,
                                "toplevel": float(top[0]) / n,
                                "exec": 1000 * float(top[1]) / n,
                                "trigger": 1000 * float(trig) / n,
                                "busy": cores,
                            }
                        )
    print(
        f"{n:,} calls per part, median of {rounds} round(s); per call; embedded Postgres, "
        "fsync on. statements = all pg_stat_statements calls (nested included) / top-level."
    )
    print()
    print(
        "| part | wall us | producer CPU us | backend CPU us | server exec us "
        "| row trigger us | statements (top-level) | WAL B | machine busy, cores |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, rows in table.items():
        m = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(
            f"| {label} | {m['wall']:.0f} | {m['client']:.0f} | {m['server']:.0f} | "
            f"{m['exec']:.0f} | {m['trigger']:.1f} | {m['statements']:.1f} "
            f"({m['toplevel']:.1f}) | {m['wal']:.0f} | {m['busy']:.2f} |"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--ab", metavar="PYTHON", help="interpreter of the base build's venv")
    parser.add_argument("--n", type=int, default=3000, help="calls per part / single jobs")
    parser.add_argument("--bulk", type=int, default=20_000, help="jobs of the bulk A/B figure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--callgrind", action="store_true", help="producer instructions per single enqueue"
    )
    parser.add_argument("--callgrind-calls", default="200,600", help="N1,N2 calls per count")
    parser.add_argument(
        "--child",
        choices=["single", "bulk", "count-empty", "count-t", "count-async"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child in ("count-empty", "count-t", "count-async"):
        count_child(options.child.removeprefix("count-"), options.dsn, options.n)
        return 0
    if options.child:
        print(json.dumps(child(options.child, options.dsn, options.n)))
        return 0
    if options.callgrind:
        builds = {"base": options.ab} if options.ab else {}
        n1, n2 = (int(c) for c in options.callgrind_calls.split(","))
        return callgrind({**builds, "new": sys.executable}, (n1, n2))
    if options.ab:
        return ab(options.ab, options.rounds, options.n, options.bulk)
    if options.breakdown:
        return breakdown(options.n, options.rounds)
    parser.error("give --breakdown, --callgrind or --ab PYTHON")
    return 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
