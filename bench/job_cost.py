"""Where a claim-worker job's cost goes, per job, with numbers. Not a test: it prints numbers.

Usage::

    python bench/job_cost.py                                   # 1 and 4 workers, 3 rounds
    python bench/job_cost.py --build new=. --build base=../base/.venv/bin/queue-claim-worker
    python bench/job_cost.py --explain                         # + per-statement EXPLAIN ANALYZE
    python bench/job_cost.py --profile                         # + cProfile of one in-process worker

One embedded PostgreSQL (fsync and ``synchronous_commit`` on, as initdb
leaves them; the workers use their own default, ``off``) with
``pg_stat_statements`` preloaded and ``track_functions = pl``. Each
measurement: a fresh migrated database, ``--jobs`` no-op jobs bulk-enqueued,
ANALYZE, CHECKPOINT, every counter reset, K real ``queue-claim-worker``
processes (``--prefetch``, default 1; ``--k 2 --prefetch 100`` is the shared
harness's drain-best) until none is unfinished. Per job it reports:

- jobs/s (N / (last ``finished_at`` - first ``started_at``));
- CPU ms of the server's processes and of the worker processes (psutil);
- the finish-and-claim statement: calls per job and server time per call
  (``pg_stat_statements`` total_exec_time / calls), and every other
  statement's time per job;
- trigger time per job (``pg_stat_user_functions`` of the PL/pgSQL trigger
  functions: the transition guard runs on each claim and finish);
- rows written to ``job_events`` per job, WAL bytes per job
  (``pg_current_wal_lsn`` before and after) and commits per job;
- updates of ``jobs`` per job and the share of them that were HOT.

With several ``--build LABEL=BIN[@LOGLEVEL]`` the rounds alternate between
those ``queue-claim-worker`` binaries (``.``: this venv's; others from another
build's venv), so they are compared in one run; workers log at INFO (the
default: one line per job, to a file) unless a level is given; the "foreign CPU" column is the machine's busy CPU minus this
bench's own processes (the server, the workers, this script), as a share of
all cores. ``--explain`` runs the statement 300 times under ``EXPLAIN
(ANALYZE, WAL)`` (one job claimed, then finished while the next is claimed)
and prints the mean execution time, trigger time and WAL per statement.
``--profile`` drains ``--jobs`` jobs with a worker in this process under
cProfile and prints the top functions by own time.

Why this script is long: its modes (drains with counters, EXPLAIN, SQL
variants, callgrind, cProfile) share the server, the fresh databases and the
per-job bookkeeping, and a benchmark read as one file is easier to trust.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import itertools
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from argparse import SUPPRESS
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import psycopg
from lib.builds import alternated
from lib.callgrind import callgrind_total
from lib.postgres import fresh_database, server, server_pids
from lib.report import table
from lib.timing import busy_seconds, cpu_seconds
from lib.workers import (
    QUEUE,
    TASKS,
    WORKER_BIN,
    enqueue_noops,
    start_workers,
    stop_workers,
    unfinished,
    worker_env,
)

if TYPE_CHECKING:
    from queue_engine.foundation.sql.compiler import RawStatement

Conn = psycopg.Connection[tuple[Any, ...]]
SERVER_SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "track_functions": "pl",
    "pg_stat_statements.track": "all",
}
#: ``JOB_COST_PLAIN_SERVER=1``: no per-function timing and only top-level statements
#: tracked (the instrumentation itself costs a PL/pgSQL call and its nested query).
PLAIN_SERVER_SETTINGS = {
    **SERVER_SETTINGS,
    "track_functions": "none",
    "pg_stat_statements.track": "top",
}
HOT_STATEMENT = "%finished AS (%SKIP LOCKED%"
#: Something run beside the workers during a drain, given the database's DSN.
Beside = Callable[[str], AbstractContextManager[object]]


def scalar(conn: Conn, query: str) -> Any:
    row = conn.execute(query).fetchone()  # type: ignore[arg-type]  # fixed bench queries
    assert row is not None
    return row[0]


def counters(conn: Conn) -> dict[str, float]:
    """The database-wide counters this bench reads before and after a drain."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn,"
        " (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'jobs'"
        "  AND schemaname = 'queue_engine'),"
        " (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobs'"
        "  AND schemaname = 'queue_engine'),"
        " (SELECT count(*) FROM queue_engine.job_events),"
        " (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),"
        " (SELECT coalesce(sum(self_time), 0) FROM pg_stat_user_functions"
        "  WHERE schemaname = 'queue_engine'),"
        " (SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
        "  WHERE schemaname = 'queue_engine'),"
        # Per-key concurrency limits (0031): the claim's calls of the limit check.
        " (SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
        "  WHERE schemaname = 'queue_engine' AND funcname = 'concurrency_free')"
    ).fetchone()
    assert row is not None
    keys = ("wal", "upd", "hot", "events", "commits", "fn_ms", "fn_calls", "cf_calls")
    return {k: float(v) for k, v in zip(keys, row, strict=True)}


def statements(conn: Conn) -> tuple[float, float, float]:
    """(hot statement calls, its total ms, every other statement's total ms) since the reset."""
    row = conn.execute(
        "SELECT coalesce(sum(calls) FILTER (WHERE query LIKE %s), 0),"
        " coalesce(sum(total_exec_time) FILTER (WHERE query LIKE %s), 0),"
        " coalesce(sum(total_exec_time) FILTER (WHERE query NOT LIKE %s), 0)"
        " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
        " WHERE datname = current_database()) AND toplevel",
        (HOT_STATEMENT, HOT_STATEMENT, HOT_STATEMENT),
    ).fetchone()
    assert row is not None
    return float(row[0]), float(row[1]), float(row[2])


def measure(
    admin: str,
    n: int,
    k: int,
    worker_bin: str,
    log_level: str,
    prefetch: int = 1,
    ddl: str = "",
    beside: Beside | None = None,
) -> dict[str, float]:
    """One drain of ``n`` jobs by ``k`` workers of ``worker_bin`` (``prefetch`` each); per-job figures.

    ``ddl``: SQL applied to the fresh database first (a migration's down SQL,
    say: an A/B of a schema change with one worker build). ``beside(dsn)``: a
    context run while the workers drain (a maintenance service, say); its CPU in
    the server counts.
    """
    with fresh_database(admin) as dsn:
        if ddl:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(ddl.replace("__SCHEMA__", "queue_engine"))  # type: ignore[arg-type]  # bench's own file
        enqueue_noops(dsn, n)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("ANALYZE queue_engine.jobs")
            conn.execute("CHECKPOINT")
            conn.execute("SELECT pg_stat_statements_reset()")
            conn.execute("SELECT pg_stat_reset()")
            time.sleep(0.6)  # let the stats reset reach the shared counters
            before = counters(conn)
            pids = server_pids(conn)
            server_before = cpu_seconds(pids)
            busy_before, wall_before = busy_seconds(), time.monotonic()
            own_before = cpu_seconds([os.getpid()])
            outs: list[str] = []
            if Path(worker_bin).name.startswith("python"):
                outs = [tempfile.mktemp(prefix="qe-jobcost-") for _ in range(k)]
                procs = [
                    subprocess.Popen(
                        [worker_bin, __file__, "--inproc-child", dsn, log_level, out],
                        env=child_env(prefetch),
                    )
                    for out in outs
                ]
            else:
                procs = start_workers(
                    dsn, k, prefetch=prefetch, worker_bin=worker_bin, log_level=log_level
                )
            try:
                with beside(dsn) if beside else nullcontext():
                    deadline = time.monotonic() + 600
                    while unfinished(conn) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    server_cpu = cpu_seconds(server_pids(conn)) - server_before
                    worker_cpu = cpu_seconds([p.pid for p in procs])
                    own = cpu_seconds([os.getpid()]) - own_before
                    busy, wall = busy_seconds() - busy_before, time.monotonic() - wall_before
            finally:
                if outs:  # in-process workers stop themselves once the queue is empty
                    for p in procs:
                        try:
                            p.wait(60)
                        except subprocess.TimeoutExpired:
                            p.kill()
                stop_workers(procs)
            loop_cpu = 0.0
            cycle: list[tuple[float, float]] = []
            for out in outs:
                child = json.loads(Path(out).read_text())
                loop_cpu += child["thread"]
                cycle.append((child["p10"], child["p50"]))
                os.unlink(out)
            time.sleep(0.6)
            after = counters(conn)
            calls, hot_ms, other_ms = statements(conn)
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
                " extract(epoch FROM max(finished_at) - min(started_at))"
                " FROM queue_engine.jobs"
            ).fetchone()
    assert row is not None
    done, seconds = int(row[0]), float(row[1])
    if done != n:
        print(f"  warning: only {done} of {n} jobs succeeded", file=sys.stderr)
    d = {key: after[key] - before[key] for key in after}
    # Our own processes: the server, the workers (worker CPU read before they
    # exited: their last moments are not counted) and this script.
    foreign = max(0.0, busy - server_cpu - worker_cpu - own) / (wall * psutil.cpu_count())
    return {
        "jobs_s": done / seconds,
        "server_ms": server_cpu / n * 1000,
        "worker_ms": worker_cpu / n * 1000,
        "loop_ms": loop_cpu / n * 1000 if outs else float("nan"),
        "cycle_p10_us": statistics.median(c[0] for c in cycle) * 1e6 if cycle else float("nan"),
        "cycle_p50_us": statistics.median(c[1] for c in cycle) * 1e6 if cycle else float("nan"),
        "calls": calls / n,
        "stmt_ms": hot_ms / calls if calls else float("nan"),
        "other_ms": other_ms / n,
        "trigger_ms": d["fn_ms"] / n,
        "trigger_calls": d["fn_calls"] / n,
        "cf_calls": d["cf_calls"] / n,
        "events": d["events"] / n,
        "wal": d["wal"] / n,
        "commits": d["commits"] / n,
        "upd": d["upd"] / n,
        "hot_share": d["hot"] / d["upd"] if d["upd"] else 0.0,
        "foreign": foreign,
    }


COLUMNS = (
    ("jobs_s", "jobs/s", "{:,.0f}"),
    ("server_ms", "server CPU ms", "{:.3f}"),
    ("worker_ms", "worker CPU ms", "{:.3f}"),
    ("loop_ms", "main thread CPU ms", "{:.3f}"),
    ("cycle_p10_us", "job cycle CPU us p10", "{:.0f}"),
    ("cycle_p50_us", "p50", "{:.0f}"),
    ("calls", "stmts", "{:.2f}"),
    ("stmt_ms", "stmt ms", "{:.3f}"),
    ("other_ms", "other stmts ms", "{:.3f}"),
    ("trigger_ms", "trigger ms", "{:.3f}"),
    ("trigger_calls", "trigger calls", "{:.2f}"),
    ("events", "event rows", "{:.2f}"),
    ("wal", "WAL bytes", "{:,.0f}"),
    ("commits", "commits", "{:.2f}"),
    ("upd", "jobs updates", "{:.2f}"),
    ("hot_share", "HOT share", "{:.0%}"),
    ("foreign", "foreign CPU", "{:.0%}"),
)


def print_table(results: dict[tuple[str, int], list[dict[str, float]]]) -> None:
    """Markdown: medians per build and K, every round below them."""
    medians = {
        build_k: {key: statistics.median(r[key] for r in rounds) for key, _, _ in COLUMNS}
        for build_k, rounds in results.items()
    }
    table(
        ["build", "K", *(c[1] for c in COLUMNS)],
        (
            [build, k, *(fmt.format(med[key]) for key, _, fmt in COLUMNS)]
            for (build, k), med in medians.items()
        ),
    )
    print("\nrounds (jobs/s; server + worker CPU ms/job; foreign CPU):")
    for (build, k), rounds in results.items():
        text = ", ".join(
            f"{r['jobs_s']:,.0f} ({r['server_ms']:.3f}+{r['worker_ms']:.3f}"
            f" main {r['loop_ms']:.3f}, cycle p10 {r['cycle_p10_us']:.0f} us; {r['foreign']:.0%})"
            for r in rounds
        )
        print(f"  {build} K={k}: {text}")
    print("\none-at-a-time bound on 2 cores, jobs/s = 2000 / (server + worker CPU ms per job):")
    for (build, k), rounds in results.items():
        cpu = statistics.median(r["server_ms"] + r["worker_ms"] for r in rounds)
        rate = statistics.median(r["jobs_s"] for r in rounds)
        print(
            f"  {build} K={k}: {cpu:.3f} ms/job -> bound {2000 / cpu:,.0f}/s;"
            f" measured {rate:,.0f}/s ({rate * cpu / 2000:.0%} of the bound)"
        )


# -- EXPLAIN ANALYZE of the hot statement ----------------------------------------------


def explain(admin: str, loops: int, batch: int = 1) -> None:
    """Mean execution, trigger time and WAL of the finish-and-claim statement, ``batch`` jobs a call.

    Each statement finishes the ``batch`` jobs the previous one claimed and
    claims ``batch`` more (``--prefetch``: a prefetching worker's statement).
    """
    from queue_engine.foundation.sql import compiler
    from queue_engine.worker import store

    text = compiler.raw_statement(
        "finish_and_claim_jobs",
        "queue_engine",
        store.worker_tags(batch, batch),
    )
    with fresh_database(admin) as dsn:
        enqueue_noops(dsn, (loops + 1) * batch)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE queue_engine.jobs")
            store.configure_session(conn, synchronous_commit="off")
            conn.execute(f"PREPARE fc AS {text.text}")  # type: ignore[arg-type]  # our own SQL
            held: list[tuple[int, int]] = []
            totals: dict[str, float] = {}
            for _ in range(loops):
                outcome = [{"id": i, "attempt": a, "status": "succeeded"} for i, a in held]
                params = {
                    "outcomes": json.dumps(
                        [
                            dict(o, kind="succeeded", refund=0, delay_s=0.0, duration_ms=0)
                            for o in outcome
                        ]
                    ),
                    "worker_id": "explain",
                    "queue": QUEUE,
                    "claim_limit": batch,
                    "lease_ttl_s": 60,
                    "jobs_channel": "queue_engine.jobs",
                    "host": "explain",
                    "slot": None,
                    "warm_key": None,
                    "affinity_wait_s": 30.0,
                }
                args = [params[name] for name in text.names]
                placeholders = ", ".join(["%s"] * len(args))
                plan = scalar_explain(conn, placeholders, args)
                top = plan[0]
                totals["exec_ms"] = totals.get("exec_ms", 0.0) + top["Execution Time"]
                for trig in top.get("Triggers", []):
                    name = "trigger " + trig["Trigger Name"]
                    totals[name] = totals.get(name, 0.0) + trig["Time"]
                    totals[name + " calls"] = totals.get(name + " calls", 0.0) + trig["Calls"]
                for name, ms in write_nodes(top["Plan"]):
                    totals[name + " ms"] = totals.get(name + " ms", 0.0) + ms
                wal = sum_wal(top["Plan"])
                totals["WAL bytes"] = totals.get("WAL bytes", 0.0) + wal
                rows = conn.execute(
                    "SELECT id, attempt FROM queue_engine.jobs"
                    " WHERE status = 'running' AND claimed_by = 'explain'"
                ).fetchall()
                held = [(int(r[0]), int(r[1])) for r in rows]
    print(
        f"\nEXPLAIN (ANALYZE, WAL) of finish_and_claim_jobs, {batch} job(s) finished and"
        f" claimed per statement, mean of {loops} statements (per statement; per job):"
    )
    for key, value in totals.items():
        print(f"  {key}: {value / loops:.4f}; {value / loops / batch:.4f}")


def scalar_explain(conn: Conn, placeholders: str, args: list[Any]) -> Any:
    query = f"EXPLAIN (ANALYZE, WAL, FORMAT JSON) EXECUTE fc({placeholders})"
    return scalar(conn, psycopg.ClientCursor(conn).mogrify(query, args))  # type: ignore[arg-type]


def write_nodes(node: dict[str, Any], cte: str = "") -> Iterator[tuple[str, float]]:
    """(CTE and node, inclusive ms) of every Insert/Update node: where the writes' time goes."""
    cte = node.get("Subplan Name", cte)
    if node.get("Node Type") == "ModifyTable":
        name = f"{node.get('Operation', '?')} {node.get('Relation Name', '?')} ({cte})"
        yield name, float(node.get("Actual Total Time", 0.0)) * float(node.get("Actual Loops", 1))
    for child in node.get("Plans", []):
        yield from write_nodes(child, cte)


def sum_wal(node: dict[str, Any]) -> float:
    """WAL bytes of a plan node (it includes its children's)."""
    return float(node.get("WAL Bytes", 0))


# -- cProfile of an in-process worker ------------------------------------------------------


def child_env(prefetch: int) -> dict[str, str]:
    """The environment of an in-process worker child: ``bench/`` importable, its prefetch."""
    return worker_env({"JOB_COST_PREFETCH": str(prefetch)})


def profile(admin: str, n: int, prefetch: int = 1) -> None:
    """Drain ``n`` jobs with a worker in this process under cProfile; print the top functions."""
    from queue_engine.foundation.logs import setup_logging
    from queue_engine.producer.tasks import load_app
    from queue_engine.worker.loop import Worker
    from queue_engine.worker.settings import WorkerSettings

    with fresh_database(admin) as dsn:
        enqueue_noops(dsn, n)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE queue_engine.jobs")
        # The console script's logging: INFO (one line per finished job) to a file.
        with tempfile.TemporaryFile("w") as log_file:
            saved_stderr, sys.stderr = sys.stderr, log_file
            setup_logging("text", "INFO")
            worker = Worker(
                WorkerSettings(queue=QUEUE, app=TASKS, dsn=dsn, prefetch=prefetch),
                load_app(TASKS),
                exit=lambda code: None,
            )

            def stop_when_done() -> None:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    while unfinished(conn):
                        time.sleep(0.05)
                worker.stop()

            threading.Thread(target=stop_when_done, daemon=True).start()
            prof = cProfile.Profile(time.thread_time)  # CPU of the main thread, not wall
            cpu0 = time.process_time()
            prof.enable()
            worker.run()
            prof.disable()
            cpu = time.process_time() - cpu0
            sys.stderr = saved_stderr
    print(
        f"\ncProfile, one in-process worker, prefetch {prefetch}, {n} jobs:"
        f" {cpu / n * 1e6:.0f} us CPU per job"
    )
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats("queue_engine", 30)


def inproc_child(dsn: str, level: str, out: str) -> None:
    """Run one worker in this process until the queue is drained; write its CPU to ``out``.

    The worker is the real :class:`Worker` of the queue_engine this interpreter
    imports (another build's venv runs this same file), logging at ``level`` to
    a file like the console script; ``thread_time`` of the main thread is the
    job loop's own CPU, apart from the heartbeat and watchdog threads.
    """
    from queue_engine.foundation.logs import setup_logging
    from queue_engine.producer.tasks import load_app
    from queue_engine.worker.loop import Worker
    from queue_engine.worker.settings import WorkerSettings

    with tempfile.TemporaryFile("w") as log:
        sys.stderr = log
        setup_logging("text", level)
        prefetch = int(os.environ.get("JOB_COST_PREFETCH") or 1)
        worker = Worker(
            WorkerSettings(queue=QUEUE, app=TASKS, dsn=dsn, prefetch=prefetch),
            load_app(TASKS),
        )

        def stop_when_done() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                while unfinished(conn):
                    time.sleep(0.05)
            worker.stop()

        # The main thread's CPU from one job's start to the next: one whole
        # cycle (finish-and-claim, bookkeeping, the handler). Its low
        # percentiles hardly move with foreign load, unlike wall time.
        stamps: list[float] = []
        run = worker.runner.run

        def timed_run(job: Any) -> None:
            stamps.append(time.thread_time())
            run(job)

        worker.runner.run = timed_run  # type: ignore[method-assign]
        threading.Thread(target=stop_when_done, daemon=True).start()
        thread0, process0 = time.thread_time(), time.process_time()
        worker.run()
        thread, process = time.thread_time() - thread0, time.process_time() - process0
    cycles = sorted(b - a for a, b in itertools.pairwise(stamps))
    Path(out).write_text(
        json.dumps(
            {
                "thread": thread,
                "process": process,
                "p10": cycles[len(cycles) // 10] if cycles else float("nan"),
                "p50": cycles[len(cycles) // 2] if cycles else float("nan"),
            }
        )
    )


def callgrind(
    admin: str, builds: list[tuple[str, str, str]], counts: tuple[int, int], prefetch: int = 1
) -> None:
    """Instructions per job of the worker process, counted by valgrind: blind to foreign load.

    Each build's interpreter runs :func:`inproc_child` under ``valgrind
    --tool=callgrind`` twice, draining ``counts[0]`` and then ``counts[1]``
    jobs; the difference of the two totals over the difference of the jobs is
    the cost of one job (start-up, imports and shutdown cancel out).
    """
    print(
        f"\nworker main-thread instructions per job (callgrind, {counts[1]} - {counts[0]} jobs,"
        f" prefetch {prefetch}):"
    )
    for label, python, level in builds:
        totals = []
        for n in counts:
            with fresh_database(admin) as dsn:
                enqueue_noops(dsn, n)
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute("ANALYZE queue_engine.jobs")
                out = tempfile.mktemp(prefix="qe-jobcost-")
                cg_dir = Path(tempfile.mkdtemp(prefix="qe-callgrind-"))
                # One output file per thread: only the main thread's count is
                # kept (the heartbeat thread and this bench's stop thread run
                # by the clock, and valgrind's clock depends on the load).
                done = subprocess.run(
                    [
                        *("valgrind", "--tool=callgrind", "--separate-threads=yes"),
                        f"--callgrind-out-file={cg_dir}/cg.out",
                        *(python, __file__, "--inproc-child", dsn, level, out),
                    ],
                    env=child_env(prefetch),
                    capture_output=True,
                    text=True,
                    check=False,
                )
                main_thread = [f for f in cg_dir.iterdir() if f.name.endswith("-01")]
                collected = callgrind_total(main_thread)
                if os.path.exists(out):
                    os.unlink(out)
                shutil.rmtree(cg_dir, ignore_errors=True)
                if collected is None:
                    print(done.stderr[-2000:], file=sys.stderr)
                    raise SystemExit("callgrind reported no count")
                totals.append(collected)
        per_job = (totals[1] - totals[0]) / (counts[1] - counts[0])
        print(f"  {label} ({level}): {per_job:,.0f} instructions per job")


#: The transition guard as migration 0001 made it: its function runs on every
#: status change, the worker's claim and finish included (0011 lets those
#: through inline).
GUARD_BEFORE_0011 = (
    Path(__file__).resolve().parent.parent / "migrations" / "0011_guard_fast_path.down.sql"
)


def sql_variants(extra: list[str]) -> dict[str, tuple[RawStatement, str]]:
    """Label -> (statement, DDL run on its database first).

    ``extra``: ``LABEL=FILE`` candidate texts of ``finish_and_claim_jobs.sql``
    (another build's, say: ``git show REV:queue_engine/foundation/sql/...``), each sent
    as the prefetch-1 worker's variant of that text.
    """
    from lib.statements import statement, without_claim_event

    from queue_engine.worker import store

    # The statement a prefetch-1 worker sends at steady state: finish one, claim one.
    worker = statement(store.worker_tags(1, 1))
    guard_0001 = GUARD_BEFORE_0011.read_text().replace("__SCHEMA__", "queue_engine")
    variants = {
        "this build": (worker, ""),
        "batch form (no one-job tags)": (statement(("cold",)), ""),
        "guard function on every change (before 0011)": (worker, guard_0001),
        "no 'claimed' event row": (without_claim_event(worker), ""),
    }
    for spec in extra:
        label, _, path = spec.partition("=")
        variants[label] = (statement(store.worker_tags(1, 1), path), "")
    return variants


def sql_ab(admin: str, loops: int, extra: list[str]) -> None:
    """Finish-and-claim statements of each variant, alternated, timed from this client.

    Each variant has its own database (the DDL of one must not touch another)
    and one session set up as a worker's (generic plan, asynchronous commit);
    every statement finishes the job the previous one of its variant claimed
    and claims the next, as a worker does. Reported: p10 and p50 of the round
    trip (the statement, its commit, the network: the same for all), and the
    server's own mean from pg_stat_statements.
    """
    from queue_engine.worker import store
    from queue_engine.worker.outcomes import Outcome

    variants = sql_variants(extra)
    with contextlib.ExitStack() as stack:
        sessions = {}
        # Each variant's own backend: its CPU is the whole server-side cost of the
        # variant's statements (ExecutorStart, which pg_stat_statements does not
        # time, the protocol and the commit included).
        backend: dict[str, int] = {}
        for label, (worker, ddl) in variants.items():
            dsn = stack.enter_context(fresh_database(admin))
            enqueue_noops(dsn, loops + 10)
            conn = stack.enter_context(psycopg.connect(dsn, autocommit=True))
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            if ddl:
                conn.execute(ddl)  # type: ignore[arg-type]  # fixed bench DDL
            conn.execute("ANALYZE queue_engine.jobs")
            conn.execute("SELECT pg_stat_statements_reset()")
            store.configure_session(conn, synchronous_commit="off")
            sessions[label] = (conn, worker, [])
            backend[label] = int(scalar(conn, "SELECT pg_backend_pid()"))
        held: dict[str, tuple[int, int] | None] = dict.fromkeys(variants)
        cpu_before = {label: cpu_seconds([pid]) for label, pid in backend.items()}
        for _ in range(loops):
            for label, (conn, worker, times) in sessions.items():
                h = held[label]
                done = (
                    []
                    if h is None
                    else [Outcome(h[0], h[1], "succeeded", "succeeded", duration_ms=0)]
                )
                params = store.statement_params(
                    "queue_engine",
                    worker_id="sqlab",
                    queue=QUEUE,
                    outcomes=done,
                    claim_limit=1,
                    lease_ttl_s=60,
                    gate=store.ClaimGate(host="sqlab"),
                )
                cur = psycopg.RawCursor(conn)
                t0 = time.perf_counter()
                values = [params[n] for n in worker.names]
                rows = cur.execute(worker.text, values, prepare=True).fetchall()
                times.append(time.perf_counter() - t0)
                claimed = [r for r in rows if r[0]]
                held[label] = (int(claimed[0][1]), int(claimed[0][2])) if claimed else None
        cpu = {label: cpu_seconds([pid]) - cpu_before[label] for label, pid in backend.items()}
        print(f"\nfinish-and-claim variants, {loops} statements each, alternated (ms):")
        print(
            "| variant | round trip p10 | p50 | backend CPU | server mean (pg_stat_statements)"
            " | WAL bytes/stmt |"
        )
        print("|---|---|---|---|---|---|")
        for label, (conn, _worker, times) in sessions.items():
            times.sort()
            row = conn.execute(
                "SELECT sum(total_exec_time) / sum(calls), sum(wal_bytes) / sum(calls)"
                " FROM pg_stat_statements WHERE query LIKE %s AND toplevel"
                " AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (HOT_STATEMENT,),
            ).fetchone()
            assert row is not None
            print(
                f"| {label} | {times[len(times) // 10] * 1000:.3f} | {times[len(times) // 2] * 1000:.3f}"
                f" | {cpu[label] / loops * 1000:.3f} | {float(row[0]):.3f} | {float(row[1]):,.0f} |"
            )


def parse_build(spec: str) -> tuple[str, str, str]:
    """``LABEL=BIN[@LEVEL]`` -> (label, binary, log level); BIN ``.`` is this venv's worker.

    A BIN named ``python*`` (a venv's interpreter) runs the worker in-process
    instead (:func:`inproc_child`), which also measures the main thread's CPU.
    """
    label, _, rest = spec.partition("=")
    binary, _, level = rest.partition("@")
    return label, str(WORKER_BIN) if binary in ("", ".") else binary, level or "INFO"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--k", default="1,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--prefetch",
        type=int,
        default=1,
        help="each worker's --prefetch (100: the shared harness's drain-best, with --k 2)",
    )
    parser.add_argument(
        "--build",
        action="append",
        default=[],
        help="LABEL=BIN[@LOGLEVEL]: a build's queue-claim-worker (repeat to alternate several;"
        " default: this venv's, at INFO, the worker's default level)",
    )
    parser.add_argument(
        "--ddl",
        action="append",
        default=[],
        help="LABEL=FILE: apply FILE's SQL to the database of that --build's rounds first"
        " (e.g. a migration's .down.sql: A/B a schema change with one worker build)",
    )
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--explain-only", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="count each --build's worker instructions per job (BIN must be a venv's python)",
    )
    parser.add_argument("--callgrind-jobs", default="100,400", help="N1,N2 jobs per count")
    parser.add_argument(
        "--sql-ab",
        type=int,
        default=0,
        metavar="N",
        help="time N finish-and-claim statements of each SQL variant, alternated",
    )
    parser.add_argument(
        "--sql-file",
        action="append",
        default=[],
        metavar="LABEL=FILE",
        help="with --sql-ab: also a candidate finish_and_claim_jobs.sql (another build's)",
    )
    parser.add_argument("--inproc-child", nargs=3, metavar=("DSN", "LEVEL", "OUT"), help=SUPPRESS)
    opts = parser.parse_args()
    if opts.inproc_child:
        inproc_child(*opts.inproc_child)
        return
    builds = [parse_build(b) for b in opts.build] or [("this", str(WORKER_BIN), "INFO")]
    ks = [int(x) for x in opts.k.split(",") if x]
    ddls = {
        label: Path(path).read_text()
        for label, _, path in (spec.partition("=") for spec in opts.ddl)
    }
    plain = bool(os.environ.get("JOB_COST_PLAIN_SERVER"))
    with server(opts.dsn, settings=PLAIN_SERVER_SETTINGS if plain else SERVER_SETTINGS) as admin:
        if not opts.explain_only and opts.rounds:
            results: dict[tuple[str, int], list[dict[str, float]]] = {}
            for r in range(opts.rounds):
                for k in ks:
                    for label, binary, level in alternated(builds, r):
                        m = measure(
                            admin, opts.jobs, k, binary, level, opts.prefetch, ddls.get(label, "")
                        )
                        results.setdefault((label, k), []).append(m)
                        print(
                            f"  round {r + 1} {label} K={k}: {m['jobs_s']:,.0f} jobs/s,"
                            f" server {m['server_ms']:.3f} + worker {m['worker_ms']:.3f} ms/job,"
                            f" main thread {m['loop_ms']:.3f}, stmt {m['stmt_ms']:.3f} ms, foreign {m['foreign']:.0%}",
                            file=sys.stderr,
                        )
            print(
                f"\nper job, N={opts.jobs:,} no-op jobs, prefetch {opts.prefetch},"
                f" median of {opts.rounds} rounds\n"
            )
            print_table(dict(sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0]))))
        if opts.explain or opts.explain_only:
            explain(admin, 300 if opts.prefetch == 1 else 30, opts.prefetch)
        if opts.sql_ab:
            sql_ab(admin, opts.sql_ab, opts.sql_file)
        if opts.callgrind:
            low, high = (int(x) for x in opts.callgrind_jobs.split(","))
            callgrind(admin, builds, (low, high), opts.prefetch)
        if opts.profile:
            profile(admin, min(opts.jobs, 20000), opts.prefetch)


if __name__ == "__main__":
    main()
