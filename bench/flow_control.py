"""What flow control (per-key concurrency limits) costs the claim, measured (issue 36, §5). Not a test.

Usage::

    python bench/flow_control.py                                  # keyed, scale, plain
    python bench/flow_control.py --scenario keyed --callgrind     # + server instructions
    python bench/flow_control.py --scenario plain --callgrind \\
        --build base=../main/.venv/bin/python \\
        --ddl base=DOWNS.sql   # 0034, 0033, 0032, 0031's .down.sql, concatenated
    python bench/flow_control.py --scenario scale --data-dir ../fc-data   # keep the load
    python bench/flow_control.py --quick                          # smoke run (the process test)

Three scenarios, each printing Markdown tables (progress on stderr):

``keyed``
    One build, plain jobs against keyed jobs in alternated rounds
    (``job_cost.measure``: real ``queue-claim-worker`` processes, prefetch 1,
    K workers): every keyed job is on one of 100 keys with a limit of 2 (a
    trigger in that label's database sets ``concurrency_key`` and
    ``concurrency_limit`` on insert). Per job: jobs/s, server and worker CPU,
    statements, calls of ``concurrency_free`` (``pg_stat_user_functions``),
    WAL bytes. ``--callgrind``: server instructions of the prefetch-1
    finish-and-claim statement, plain and keyed (single-user PostgreSQL under
    valgrind, ``lib.callgrind``): timed drains on a shared 2-core machine
    move 20-40 % from round to round, instructions do not.

``scale``
    The claim with 1,000,000 queued keyed jobs over 1,000 keys against over
    100,000 keys (limit 2 each), beside a plain backlog of the same size, and
    the head-of-line case: the first 100,000 jobs in claim order on 10 keys
    that are full (another worker runs 2 of each), the rest on 1,000 other
    keys. Each backlog is a database of its own, loaded once by one
    ``INSERT ... SELECT generate_series`` and ``VACUUM ANALYZE``
    (``--data-dir`` keeps the server and its databases for the next run).
    Per backlog: the worker's generic-plan finish-and-claim statement run
    N times as a prefetch-1 worker sends it (server mean from
    ``pg_stat_statements``, the round trip's p50, ``concurrency_free`` calls
    per statement), one more under ``EXPLAIN (ANALYZE, BUFFERS)`` (the rows
    the claim's scan walked, the buffers it touched), and a short drain by K
    workers (not of the head-of-line backlog: each of its claims walks the
    full keys' jobs). ``--callgrind``: the statement's server instructions
    on each backlog without full keys (a data folder of its own, loaded
    the same way): the flat-at-scale ratio without the machine's load.

``plain``
    What plain jobs pay: this build against ``--build base=PYTHON`` (the
    build before the issue; its schema has none of 0031-0034: ``--ddl
    base=FILE`` with their down migrations, newest first), drains as in
    ``keyed`` and single enqueues (``Client.enqueue``, one job a call, in
    each build's interpreter), alternated. ``--callgrind``: worker
    instructions per job (``job_cost.callgrind``) and the server
    instructions of each build's finish-and-claim statement. Without
    ``--build`` the base is this build again (a smoke run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from job_cost import SERVER_SETTINGS, Conn, callgrind, measure, scalar
from lib.builds import Build, alternated
from lib.callgrind import per_statement
from lib.postgres import recreate, server
from lib.report import log, table
from lib.statements import WORKER_SESSION, downs, execute, knocked_out, statement, succeeded
from lib.timing import pct
from lib.workers import QUEUE, WORKER_BIN, start_workers, stop_workers, worker_env
from statement_cost import script

from queue_engine import Client
from queue_engine.foundation.sql.compiler import RawStatement
from queue_engine.worker import store

REPO = Path(__file__).resolve().parent.parent
#: Every keyed job on one of 100 keys, limit 2 each: set on insert, so the
#: enqueue is the same for both labels and the claim is what differs.
KEYED_DDL = """
CREATE FUNCTION public.bench_keyed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.concurrency_key := 'k' || (NEW.id % 100);
    NEW.concurrency_limit := 2;
    RETURN NEW;
END $$;
CREATE TRIGGER bench_keyed BEFORE INSERT ON __SCHEMA__.jobs
    FOR EACH ROW EXECUTE FUNCTION public.bench_keyed();
"""
#: The same keys on jobs already queued (the callgrind data folders).
KEYED_UPDATE = (
    "UPDATE queue_engine.jobs SET concurrency_key = 'k' || (id % 100), concurrency_limit = 2"
)
#: concurrency_free() doing nothing: the cost of the call alone (a knock-out, not a design).
BARE_FREE = """
CREATE OR REPLACE FUNCTION queue_engine.concurrency_free(
    p_key text, p_limit integer, p_weight integer)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$ BEGIN RETURN 1; END $$;
"""
#: A backlog of ``n`` no-op jobs of the bench queue in one statement, ids in
#: claim order (one ``now()``: same priority and due time). ``keys``: the key of
#: job ``g`` (SQL over ``g``), NULL for plain jobs.
LOAD = (
    "INSERT INTO queue_engine.jobs (queue, task, args, concurrency_key, concurrency_limit)"
    " SELECT 'bench', 'noop', '{{}}'::jsonb, {key}, {limit}"
    " FROM generate_series(1, %(n)s::bigint) g ORDER BY g"
)
#: Per-job columns of a drain (``job_cost.measure``'s keys).
DRAIN_COLUMNS = (
    ("jobs_s", "jobs/s", "{:,.0f}"),
    ("server_ms", "server CPU ms/job", "{:.3f}"),
    ("worker_ms", "worker CPU ms/job", "{:.3f}"),
    ("calls", "stmts/job", "{:.2f}"),
    ("stmt_ms", "stmt ms", "{:.3f}"),
    ("cf_calls", "concurrency_free calls/job", "{:.2f}"),
    ("wal", "WAL bytes/job", "{:,.0f}"),
    ("foreign", "foreign CPU", "{:.0%}"),
)


# -- drains of two labels, alternated --------------------------------------------------


def drains(
    admin: str,
    labels: list[tuple[str, str, str]],
    opts: argparse.Namespace,
) -> dict[tuple[str, int], list[dict[str, float]]]:
    """(label, K) -> each round's ``measure``; ``labels``: (label, worker binary, DDL)."""
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    for r in range(opts.rounds):
        for k in opts.ks:
            for label, binary, ddl in alternated(labels, r):
                m = measure(admin, opts.jobs, k, binary, "INFO", 1, ddl)
                results.setdefault((label, k), []).append(m)
                log(
                    f"round {r + 1} {label} K={k}: {m['jobs_s']:,.0f} jobs/s,"
                    f" server {m['server_ms']:.3f} + worker {m['worker_ms']:.3f} ms/job,"
                    f" concurrency_free {m['cf_calls']:.2f}/job, foreign {m['foreign']:.0%}"
                )
    return results


def print_drains(results: dict[tuple[str, int], list[dict[str, float]]], base: str) -> None:
    """Medians per label and K, jobs/s against ``base``'s of the same K; every round below."""
    med = {
        key: {c: statistics.median(r[c] for r in rounds) for c, _, _ in DRAIN_COLUMNS}
        for key, rounds in results.items()
    }
    ordered = sorted(med, key=lambda lk: (lk[1], lk[0] != base))
    table(
        ["jobs", "K", "jobs/s", f"vs {base}", *(h for _, h, _ in DRAIN_COLUMNS[1:])],
        (
            [
                label,
                k,
                DRAIN_COLUMNS[0][2].format(med[(label, k)]["jobs_s"]),
                (
                    f"{med[(label, k)]['jobs_s'] / med[(base, k)]['jobs_s'] - 1:+.1%}"
                    if label != base and (base, k) in med
                    else ""
                ),
                *(f.format(med[(label, k)][c]) for c, _, f in DRAIN_COLUMNS[1:]),
            ]
            for label, k in ordered
        ),
    )
    print("\nrounds (jobs/s):")
    for label, k in ordered:
        print(f"  {label} K={k}: " + ", ".join(f"{r['jobs_s']:,.0f}" for r in results[(label, k)]))


def server_instructions(
    labels: list[tuple[str, RawStatement, str]], counts: tuple[int, int]
) -> None:
    """Server instructions and WAL of the prefetch-1 statement, per label (statement, DDL)."""
    print(
        f"\nserver instructions per finish-and-claim statement (prefetch 1, single-user"
        f" PostgreSQL under callgrind, {counts[1]} - {counts[0]} statements):\n"
    )

    def rows() -> Iterator[list[str]]:
        first = None
        for label, worker, ddl in labels:

            def input_for(_pg: object, n: int, worker: RawStatement = worker) -> str:
                return script(worker.text, worker.names, n)

            per, wal = per_statement(label, counts, ddl, counts[1] + 10, input_for)
            first = first or per
            yield [label, f"{per:,.0f}", f"{per / first - 1:+.1%}", f"{wal:,.0f}"]

    table(["statement", "instructions", "vs first", "WAL bytes"], rows())


# -- keyed -------------------------------------------------------------------------------


def keyed(admin: str, opts: argparse.Namespace) -> None:
    """Plain against keyed jobs, one build, alternated rounds."""
    worker = str(WORKER_BIN)
    labels = [("plain", worker, ""), ("keyed", worker, KEYED_DDL)]
    # Prototypes: keyed jobs with concurrency_free() replaced by a file's DDL.
    variants = [(label, Path(path).read_text()) for label, _, path in opts.variants]
    labels += [(f"keyed, {label}", worker, KEYED_DDL + ddl) for label, ddl in variants]
    if opts.rounds:
        results = drains(admin, labels, opts)
        print(
            f"\n### keyed: {opts.jobs:,} no-op jobs, 100 keys x limit 2 (keyed), prefetch 1,"
            f" median of {opts.rounds} round(s)\n"
        )
        print_drains(results, "plain")
    if opts.callgrind:
        this = statement(store.worker_tags(1, 1))
        # Where a keyed claim's instructions go: the claim without its limit
        # check (what a keyed row costs the rest of the statement: the running
        # keys' index, a wider row), and with the function's body a bare RETURN
        # (the cost of calling a PL/pgSQL function from the claim's filter).
        unchecked = knocked_out(
            this, " AND (j.concurrency_key IS NULL OR", " AND EXISTS (SELECT 1 FROM gate)", ""
        )
        server_instructions(
            [
                ("plain", this, ""),
                ("keyed (100 keys, limit 2)", this, KEYED_UPDATE),
                ("keyed, no limit check (knock-out)", unchecked, KEYED_UPDATE),
                ("keyed, concurrency_free a bare RETURN 1", this, BARE_FREE + KEYED_UPDATE),
                *(
                    (
                        f"keyed, {label}",
                        this,
                        ddl.replace("__SCHEMA__", "queue_engine") + ";" + KEYED_UPDATE,
                    )
                    for label, ddl in variants
                ),
            ],
            opts.callgrind_counts,
        )


# -- plain: this build against the build before ------------------------------------------


def enqueue_child(dsn: str, n: int) -> None:
    """Enqueue ``n`` jobs one a call (a warm client); print the seconds per call, sorted."""
    times = []
    with Client(dsn) as client:
        for i in range(n + 20):
            t0 = time.perf_counter()
            client.enqueue("noop", queue=QUEUE, args={"i": i})
            if i >= 20:  # the pool's first connection and the first plans
                times.append(time.perf_counter() - t0)
    print(json.dumps(sorted(times)))


def single_enqueue(admin: str, builds: list[tuple[str, str, str]], n: int, rounds: int) -> None:
    """Single enqueues in each build's interpreter, alternated; p50 and p10 per call."""
    from lib.postgres import fresh_database

    got: dict[str, list[float]] = {}
    for r in range(rounds):
        for label, python, ddl in alternated(builds, r):
            with fresh_database(admin) as dsn:
                if ddl:
                    with psycopg.connect(dsn, autocommit=True) as conn:
                        conn.execute(ddl.replace("__SCHEMA__", "queue_engine"))  # type: ignore[arg-type]  # the bench's own file
                # Asynchronous commit, as a worker's session: with the server's
                # fsync on, a durable commit's flush (2-4 ms on this disk) would
                # hide the enqueue's own cost, which is what differs.
                done = subprocess.run(
                    [python, __file__, "--enqueue-child", dsn, str(n)],
                    env=worker_env({"PGOPTIONS": "-c synchronous_commit=off"}),
                    capture_output=True,
                    text=True,
                    check=True,
                )
            times = json.loads(done.stdout.strip().splitlines()[-1])
            got.setdefault(label, []).append(pct(times, 50))
            got.setdefault(label + " p10", []).append(pct(times, 10))
            log(f"round {r + 1} {label}: single enqueue p50 {pct(times, 50) * 1e6:.0f} us")
    base = builds[0][0]
    print(f"\nsingle enqueue, {n:,} calls a round, median of {rounds} round(s) (us a call):\n")
    table(
        ["build", "p50", "p10", f"p50 vs {base}", "rounds (p50)"],
        (
            [
                label,
                f"{statistics.median(got[label]) * 1e6:.0f}",
                f"{statistics.median(got[label + ' p10']) * 1e6:.0f}",
                f"{statistics.median(got[label]) / statistics.median(got[base]) - 1:+.1%}"
                if label != base
                else "",
                ", ".join(f"{t * 1e6:.0f}" for t in got[label]),
            ]
            for label, _, _ in builds
        ),
    )


def base_sql(python: str) -> str:
    """The path of ``finish_and_claim_jobs.sql`` in the build of ``python``."""
    done = subprocess.run(
        [
            python,
            "-c",
            "import pathlib, queue_engine.foundation.sql as s;"
            " print(pathlib.Path(s.__file__).parent / 'finish_and_claim_jobs.sql')",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),  # not this checkout: ``-c`` imports from the working folder
    )
    return done.stdout.strip()


def plain(admin: str, opts: argparse.Namespace) -> None:
    """Plain jobs: this build against the base build."""
    base = Build.parse(opts.base or ".", "base")
    base_ddl = Path(opts.base_ddl).read_text() if opts.base_ddl else ""
    label = "base" if opts.base else "base (this build again)"
    results = drains(
        admin,
        [(label, base.script("queue-claim-worker"), base_ddl), ("new", str(WORKER_BIN), "")],
        opts,
    )
    print(
        f"\n### plain: {opts.jobs:,} no-op jobs, this build against {label}, prefetch 1,"
        f" median of {opts.rounds} round(s)\n"
    )
    print_drains(results, label)
    single_enqueue(
        admin,
        [(label, base.python, base_ddl), ("new", sys.executable, "")],
        opts.enqueue_calls,
        opts.rounds,
    )
    if opts.callgrind:
        low, high = opts.callgrind_counts
        callgrind(
            admin, [(label, base.python, "INFO"), ("new", sys.executable, "INFO")], (low, high)
        )
        this = statement(store.worker_tags(1, 1))
        before = statement(store.worker_tags(1, 1), base_sql(base.python))
        server_instructions(
            [(label, before, downs(34, 33, 32, 31) if opts.base else ""), ("new", this, "")],
            opts.callgrind_counts,
        )


# -- scale ---------------------------------------------------------------------------------


def backlogs(n: int, low: int, high: int) -> dict[str, tuple[str, str, int]]:
    """Name -> (key SQL over g, description, jobs a worker holds running first).

    The keys are spread by a hash of g (``hashint8``): any window of the claim
    order meets many keys, as a real mix would. Head-of-line: the first n/10
    jobs are on 10 keys, the rest on ``low`` other keys; its 20 first claims
    (2 per hot key) stay running, so those keys are full.
    """
    spread = "'k' || (abs(hashint8(g)) %% {})"
    return {
        "plain": ("NULL", f"{n:,} plain jobs", 0),
        f"{low:,} keys": (spread.format(low), f"{n:,} jobs over {low:,} keys", 0),
        f"{high:,} keys": (spread.format(high), f"{n:,} jobs over {high:,} keys", 0),
        "head-of-line": (
            f"CASE WHEN g <= {n // 10} THEN 'hot' || (g %% 10) ELSE {spread.format(low)} END",
            f"first {n // 10:,} on 10 full keys, then {low:,} keys",
            20,
        ),
    }


def db_name(label: str) -> str:
    return "qe_fc_" + "".join(ch if ch.isalnum() else "_" for ch in label.lower())


def load(admin: str, name: str, key: str, n: int) -> str:
    """Database ``name`` holding the backlog (made once: a later run with ``--data-dir`` reuses it)."""
    from psycopg.conninfo import make_conninfo

    dsn = make_conninfo(admin, dbname=name)
    with psycopg.connect(admin, autocommit=True) as conn:
        known = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if known:
        with psycopg.connect(dsn, autocommit=True) as conn:
            loaded = conn.execute(
                "SELECT to_regclass('public.bench_loaded') IS NOT NULL"
            ).fetchone()
            if loaded and loaded[0] and scalar(conn, "SELECT n FROM public.bench_loaded") == n:
                return dsn
    recreate(admin, name)
    t0 = time.monotonic()
    limit = "NULL" if key == "NULL" else "2"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(LOAD.format(key=key, limit=limit), {"n": n})  # type: ignore[arg-type]  # bench's own SQL
        conn.execute("VACUUM ANALYZE queue_engine.jobs")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("CREATE TABLE public.bench_loaded (n bigint)")
        conn.execute("INSERT INTO public.bench_loaded VALUES (%s)", (n,))
    log(f"loaded {name}: {n:,} jobs in {time.monotonic() - t0:.0f} s")
    return dsn


def prepared(conn: Conn) -> tuple[str, tuple[str, ...]]:
    """A worker's session on ``conn`` with its prefetch-1 statement prepared as ``fc``."""
    worker = statement(store.worker_tags(1, 1))
    for line in WORKER_SESSION:
        conn.execute(line)  # type: ignore[arg-type]  # fixed settings
    conn.execute(f"PREPARE fc AS {worker.text}")  # type: ignore[arg-type]  # our own SQL
    return "fc", worker.names


def claimed_id(rows: list[tuple[Any, ...]]) -> int | None:
    """The id of the job the statement's answer claimed (``is_claim`` true), if any."""
    return next((int(r[1]) for r in rows if r[0]), None)


def walked(node: dict[str, Any], cte: str = "") -> Iterator[tuple[int, int]]:
    """(rows returned, rows removed by filter) of the claim's scan of jobs (CTE candidate)."""
    cte = node.get("Subplan Name", cte)
    if (
        "candidate" in cte
        and node.get("Relation Name") == "jobs"
        and node.get("Alias") in ("j", "j_1")
    ):
        loops = int(node.get("Actual Loops", 1))
        yield (
            int(node.get("Actual Rows", 0)) * loops,
            int(node.get("Rows Removed by Filter", 0)) * loops,
        )
    for child in node.get("Plans", []):
        yield from walked(child, cte)


def claim_cost(dsn: str, loops: int, hold: int, keyed: bool) -> dict[str, float]:
    """The prefetch-1 statement ``loops`` times on the backlog of ``dsn``, then once under EXPLAIN.

    ``hold``: jobs another session claims first and keeps running (the full
    keys of the head-of-line backlog). Every statement finishes the job the one
    before claimed, so the running count stays where ``hold`` put it.
    """
    with psycopg.connect(dsn, autocommit=True) as holder:
        name, names = prepared(holder)
        # Claim only (nothing to finish), kept running; a kept database has them already.
        held_before = scalar(
            holder,
            "SELECT count(*) FROM queue_engine.jobs"
            " WHERE status = 'running' AND claimed_by = 'holder'",
        )
        for _ in range(hold - int(held_before)):
            holder.execute(execute(name, names, [])[:-1].replace("'w'", "'holder'"))  # type: ignore[arg-type]  # bench's own SQL
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
            conn.execute("SELECT pg_stat_reset()")
            name, names = prepared(conn)
            held: int | None = None
            times = []
            for _ in range(loops):
                done = [succeeded(held)] if held else []
                t0 = time.perf_counter()
                rows = conn.execute(execute(name, names, done)[:-1]).fetchall()  # type: ignore[arg-type]
                times.append(time.perf_counter() - t0)
                held = claimed_id(rows)
            done = [succeeded(held)] if held else []
            plan = scalar(
                conn,
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + execute(name, names, done)[:-1],  # type: ignore[arg-type]
            )[0]
            mean = scalar(
                conn,
                "SELECT sum(total_exec_time) / nullif(sum(calls), 0) FROM pg_stat_statements"
                " WHERE query LIKE '%finished AS (%SKIP LOCKED%'"
                " AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            )
        # The measuring session has ended: its function counts are flushed.
        with psycopg.connect(dsn, autocommit=True) as conn:
            calls = 0.0
            for _ in range(50):
                conn.execute("SELECT pg_stat_clear_snapshot()")
                calls = float(
                    scalar(
                        conn,
                        "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
                        " WHERE funcname = 'concurrency_free'",
                    )
                )
                if calls or not keyed:
                    break
                time.sleep(0.1)
    top = plan["Plan"]
    rows_out, removed = (
        (sum(x) for x in zip(*walked(top), strict=True)) if list(walked(top)) else (0, 0)
    )
    return {
        "server_ms": float(mean or 0.0),
        "p50_ms": pct(times, 50) * 1000,
        "cf_calls": calls / (loops + 1),
        "explain_ms": float(plan["Execution Time"]),
        "walked": float(rows_out + removed),
        "buffers": float(top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)),
    }


def scale_drain(admin_dsn: str, dsn: str, n: int, k: int) -> float:
    """Jobs/s of a drain of ``n`` jobs of the backlog by ``k`` workers (stopped after ``n``).

    Only this drain's jobs count (a kept database holds earlier runs' and
    rounds'): those finished since it started, found through the index of
    ``finished_at``, not by a scan of a million rows every poll.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        since = scalar(conn, "SELECT clock_timestamp()")
        query = (
            "SELECT count(*), extract(epoch FROM max(finished_at) - min(started_at))"
            " FROM queue_engine.jobs WHERE finished_at >= %s AND status = 'succeeded'"
        )

        def done() -> tuple[int, float]:
            row = conn.execute(query, (since,)).fetchone()
            assert row is not None
            return int(row[0]), float(row[1] or 0.0)

        procs = start_workers(dsn, k, log_level="WARNING")
        try:
            deadline = time.monotonic() + 300
            while done()[0] < n and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop_workers(procs)
        count, seconds = done()
    return count / max(seconds, 1e-9)


def scale(admin: str, opts: argparse.Namespace) -> None:
    """The claim's cost against the backlog's number of keys, and with full keys at its head."""
    n, low, high = opts.scale_jobs, opts.keys_low, opts.keys_high
    loaded = {
        label: (load(admin, db_name(label), key, n), key, what, hold)
        for label, (key, what, hold) in backlogs(n, low, high).items()
    }
    rounds: dict[str, list[dict[str, float]]] = {}
    whats = {label: what for label, (_, _, what, _) in loaded.items()}
    # The backlogs without full keys in alternated rounds (a drift of the
    # machine's load hits all alike); the head-of-line one once, its claims
    # take seconds each.
    for r in range(opts.rounds):
        for label, (dsn, key, _, hold) in alternated(list(loaded.items()), r):
            if hold and r:
                continue
            loops = opts.hol_loops if hold else opts.claim_loops
            m = claim_cost(dsn, loops, hold, key != "NULL")
            m["loops"] = loops
            m["jobs_s"] = float("nan") if hold else scale_drain(admin, dsn, opts.drain_jobs, 4)
            rounds.setdefault(label, []).append(m)
            log(
                f"round {r + 1} scale {label}: {m['server_ms']:.3f} ms a statement,"
                f" walked {m['walked']:,.0f} rows, drain {m['jobs_s']:,.0f} jobs/s"
            )
    results = {
        label: {c: statistics.median(m[c] for m in ms) for c in ms[0]}
        for label, ms in rounds.items()
    }
    ref = results[f"{low:,} keys"]["server_ms"]
    print(
        f"\n### scale: {n:,} queued jobs (limit 2 a key), the prefetch-1 finish-and-claim"
        f" statement (generic plan); drain of {opts.drain_jobs:,} jobs by 4 workers\n"
    )
    table(
        [
            "backlog",
            "statements",
            "server ms (mean)",
            f"vs {low:,} keys",
            "round trip p50 ms",
            "concurrency_free calls/stmt",
            "EXPLAIN ms",
            "rows walked",
            "buffers",
            "drain jobs/s (K=4)",
        ],
        (
            [
                f"{label}: {whats[label]}",
                f"{m['loops']:.0f}",
                f"{m['server_ms']:.3f}",
                f"{m['server_ms'] / ref:.2f}x",
                f"{m['p50_ms']:.3f}",
                f"{m['cf_calls']:,.2f}",
                f"{m['explain_ms']:.3f}",
                f"{m['walked']:,.0f}",
                f"{m['buffers']:,.0f}",
                "" if m["jobs_s"] != m["jobs_s"] else f"{m['jobs_s']:,.0f}",
            ]
            for label, m in results.items()
        ),
    )
    print(f"\nrounds (server ms a statement; drain jobs/s), median above, of {opts.rounds}:")
    for label, ms in rounds.items():
        print(f"  {label}: " + ", ".join(f"{m['server_ms']:.3f}; {m['jobs_s']:,.0f}" for m in ms))
    print(
        f"\nflat at scale: {high:,} keys / {low:,} keys = "
        f"{results[f'{high:,} keys']['server_ms'] / ref:.2f}x (target <= 1.3x)"
    )


def backlog_loader(key: str) -> Callable[[str, int], None]:
    """A ``lib.callgrind`` load: ``jobs`` jobs keyed by ``key`` (as :func:`load`), vacuumed."""

    def fill(dsn: str, jobs: int) -> None:
        limit = "NULL" if key == "NULL" else "2"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(LOAD.format(key=key, limit=limit), {"n": jobs})  # type: ignore[arg-type]  # bench's own SQL
            conn.execute("VACUUM ANALYZE queue_engine.jobs")

    return fill


def scale_instructions(opts: argparse.Namespace) -> None:
    """Server instructions of the prefetch-1 claim on each backlog without full keys (callgrind)."""
    n, low, high = opts.scale_jobs, opts.keys_low, opts.keys_high
    this = statement(store.worker_tags(1, 1))
    counts = opts.callgrind_counts
    print(
        f"\nserver instructions per finish-and-claim statement on {n:,} queued jobs"
        f" (single-user PostgreSQL under callgrind, {counts[1]} - {counts[0]} statements):\n"
    )

    def rows() -> Iterator[list[str]]:
        ref = 0.0
        for label, (key, what, hold) in backlogs(n, low, high).items():
            if hold:
                continue

            def input_for(_pg: object, k: int) -> str:
                return script(this.text, this.names, k)

            per, wal = per_statement(label, counts, "", n, input_for, backlog_loader(key))
            ref = per if label == f"{low:,} keys" else ref
            versus = f"{per / ref:.3f}x" if ref else ""
            yield [f"{label}: {what}", f"{per:,.0f}", versus, f"{wal:,.0f}"]

    table(["backlog", "instructions", f"vs {low:,} keys", "WAL bytes"], rows())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn", default="", help="a server to use (admin, CREATEDB) instead of an embedded one"
    )
    parser.add_argument(
        "--data-dir", default="", help="keep the embedded server here (scale loads reused)"
    )
    parser.add_argument("--scenario", default="keyed,scale,plain")
    parser.add_argument("--quick", action="store_true", help="a small smoke run of every scenario")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--k", default="1,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true", help="+ instruction counts (valgrind)")
    parser.add_argument("--callgrind-jobs", default="100,300", help="N1,N2 jobs or statements")
    parser.add_argument("--build", default="", help="base=PYTHON: the build before the issue")
    parser.add_argument("--ddl", default="", help="base=FILE: SQL run in the base's databases")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=FILE",
        help="keyed: also keyed jobs with FILE's DDL run first (a prototype of concurrency_free)",
    )
    parser.add_argument("--enqueue-calls", type=int, default=2000)
    parser.add_argument("--scale-jobs", type=int, default=1_000_000)
    parser.add_argument("--keys-low", type=int, default=1_000)
    parser.add_argument("--keys-high", type=int, default=100_000)
    parser.add_argument("--claim-loops", type=int, default=500)
    parser.add_argument("--hol-loops", type=int, default=5)
    parser.add_argument("--drain-jobs", type=int, default=5_000)
    parser.add_argument("--enqueue-child", nargs=2, metavar=("DSN", "N"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.enqueue_child:
        enqueue_child(opts.enqueue_child[0], int(opts.enqueue_child[1]))
        return
    if opts.quick:
        opts.jobs, opts.rounds, opts.enqueue_calls = 300, 1, 100
        opts.scale_jobs, opts.keys_low, opts.keys_high = 3_000, 10, 1_000
        opts.claim_loops, opts.hol_loops, opts.drain_jobs = 20, 2, 200
        opts.callgrind = False
    opts.ks = [int(x) for x in opts.k.split(",") if x]
    opts.callgrind_counts = tuple(int(x) for x in opts.callgrind_jobs.split(","))
    opts.variants = [spec.partition("=") for spec in opts.variant]
    opts.base = opts.build.partition("=")[2] if opts.build else ""
    opts.base_ddl = opts.ddl.partition("=")[2] if opts.ddl else ""
    scenarios = [s for s in opts.scenario.split(",") if s]
    unknown = set(scenarios) - {"keyed", "scale", "plain"}
    if unknown:
        parser.error(f"unknown scenario {', '.join(sorted(unknown))}: keyed, scale, plain")
    # The scale backlogs (four databases of 1,000,000 jobs) stay in memory.
    settings = {**SERVER_SETTINGS, "max_wal_size": "4GB", "shared_buffers": "1GB"}
    with server(opts.dsn, settings=settings, data_dir=opts.data_dir) as admin:
        for name in scenarios:
            log(f"scenario {name}")
            {"keyed": keyed, "scale": scale, "plain": plain}[name](admin, opts)
            if name == "scale" and opts.callgrind:
                scale_instructions(opts)


if __name__ == "__main__":
    main()
