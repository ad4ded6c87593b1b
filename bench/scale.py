"""Flat cost at 10 million jobs: each figure on a big table against a near-empty one, same run.

Not a test: it prints numbers. Usage::

    python bench/scale.py --finished 1000000 --queued 100000          # a quick look
    python bench/scale.py --data-dir ~/qe-scale                       # 10M + 1M, server kept
    python bench/scale.py --data-dir ~/qe-scale --reuse               # measure again, no fill

Two databases on one server (embedded, fsync on, or ``--dsn`` with CREATEDB):
``qe_scale_empty`` (migrated, nothing in it) and ``qe_scale_big``, filled
set-based by ``bench/scale_db.py`` (``bench/sql/fill_*.sql``) with
``--finished`` finished jobs over ``--span-days`` days, their job_events rows,
and a backlog of ``--queued`` queued jobs in four queues the bench never
drains. Every figure is measured in alternated rounds (empty, big, empty,
big, ...):

* single enqueue (``Client.enqueue``, one transaction each) and bulk enqueue
  (``Client.enqueue_many``, 1,000 per call) into queue ``enq`` (deleted after);
* drain: ``--drain-jobs`` no-op jobs in queue ``bench`` (beside the backlog,
  never behind it) run by K real ``queue-claim-worker`` processes; jobs/s from
  the jobs table, claim+finish server time per job from pg_stat_statements (the
  worker's one statement), server and worker CPU per job from psutil;
* ``queue-ctl stats``, ``workers``, ``top --iterations 1`` and ``list``:
  end-to-end wall time of the command and the server time of its statements.

Then, once per database, the pruner phase (``--prune-seconds``): a feeder
inserts ``--prune-rate`` finished jobs per second that are already past the
7-day retention while 2 workers drain queue ``bench`` and the pruner runs as
the orchestrator's does (``prune_once``, 20 batches of 1,000, 1 s between runs
while a backlog is left); it reports rows pruned/s, the prune statement's time
and WAL per batch, the worker statement's longest time and the longest lock
wait seen in pg_stat_activity. Last: sizes per million jobs, dead tuples,
autovacuum counts and the time of a plain VACUUM of each table.

Why this file is long (~660 lines): it holds every measurement of the run
(enqueue, drain, the --base-schema A/B, queue-ctl views, --compare-sql, the pruner phase) and the
report, each short; the fill and the statistics readers are in ``bench/scale_db.py``,
the server and the workers in ``bench/lib``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import scale_db as db
from lib.postgres import describe, recreate, server
from lib.report import log
from lib.workers import (
    bench_left,
    drain,
    enqueue_noops,
    finished_span,
    start_workers,
    stop_workers,
)
from psycopg import sql as psql
from psycopg.conninfo import make_conninfo

from queue_engine import Client
from queue_engine.foundation import sql as queries
from queue_engine.foundation.settings import ARCHIVE_AFTER_S
from queue_engine.orchestrator.archiver import Cursor, archive_once
from queue_engine.orchestrator.pruner import (
    BATCH_SIZE_DEFAULT,
    CATCH_UP_DEFAULT_S,
    MAX_BATCHES_DEFAULT,
    PRUNE_INTERVAL_DEFAULT_S,
    Retention,
    prune_once,
)

BIN = Path(sys.executable).parent
WORKER_STATEMENT = "%claim_events%"
PRUNE_STATEMENT = "%doomed%"
#: Figures that must stay within this ratio big/empty (the issue's bar).
FLAT = 1.3
#: Figures whose server time must stay under this (ms).
CTL_BAR_MS = 200.0


@dataclass
class Figures:
    """Per figure name, per database ("empty", "big"): one value per round."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    #: Figure names where larger is better (rates); the ratio is then empty/big.
    rates: set[str] = field(default_factory=set)

    def add(self, name: str, which: str, value: float, *, rate: bool = False) -> None:
        self.values.setdefault(name, {}).setdefault(which, []).append(value)
        if rate:
            self.rates.add(name)


def ratio(name: str, empty: float, big: float, rates: set[str]) -> float:
    """How much worse big is than empty (>1: worse), for a rate or a cost."""
    if name in rates:
        return empty / big if big else float("inf")
    return big / empty if empty else float("inf")


def report(figures: Figures) -> None:
    """The table: median empty, median big, ratio of medians, and each round's ratio."""
    print(f"\n{'figure':<46}{'empty':>11}{'big':>11}{'ratio':>8}   per round (empty/big)")
    for name, per in figures.values.items():
        empty, big = per.get("empty", []), per.get("big", [])
        if not empty or not big:
            continue
        me, mb = statistics.median(empty), statistics.median(big)
        r = ratio(name, me, mb, figures.rates)
        rounds = "  ".join(f"{e:,.3g}/{b:,.3g}" for e, b in zip(empty, big, strict=False))
        print(f"{name:<46}{me:>11,.3f}{mb:>11,.3f}{r:>7.2f}x   {rounds}")


# -- measurements ---------------------------------------------------------------------


@dataclass
class Target:
    """One database under test."""

    which: str  # "empty" or "big"
    dsn: str
    oid: int
    #: Figure name prefix ("" or "base ", "new " in a --base-schema A/B).
    label: str = ""
    #: Where the worker's console scripts are (another venv for the base build).
    bin_dir: Path = BIN


def enqueue_figures(
    t: Target, admin: psycopg.Connection[Any], single: int, bulk: int, figures: Figures
) -> None:
    """Single and bulk enqueue rates and server time per job; the jobs are deleted after."""
    with Client(t.dsn) as client:
        client.enqueue("noop", queue="enq")  # pool warm
        db.pss_reset(admin, t.oid)
        t0 = time.perf_counter()
        for i in range(single):
            client.enqueue("noop", queue="enq", args={"n": i, "request_id": "r" * 32})
        seconds = time.perf_counter() - t0
        server = db.pss_totals(admin, t.oid)
        figures.add(f"{t.label}single enqueue (jobs/s)", t.which, single / seconds, rate=True)
        figures.add(f"{t.label}single enqueue server ms/job", t.which, server.total_ms / single)
        db.pss_reset(admin, t.oid)
        t0 = time.perf_counter()
        for start in range(0, bulk, 1000):
            client.enqueue_many(
                [
                    {"task": "noop", "queue": "enq", "args": {"n": i}}
                    for i in range(start, min(bulk, start + 1000))
                ]
            )
        seconds = time.perf_counter() - t0
        server = db.pss_totals(admin, t.oid)
        figures.add(f"{t.label}bulk enqueue (jobs/s)", t.which, bulk / seconds, rate=True)
        figures.add(f"{t.label}bulk enqueue server ms/job", t.which, server.total_ms / bulk)
    with psycopg.connect(t.dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM queue_engine.jobs WHERE queue = 'enq' AND status = 'queued'")


def archive_phase(which: str, dsn: str) -> None:
    """What the orchestrator's archiver does to the history after the upgrade to 0027.

    Succeeded jobs older than the archive age move to ``jobs_archive`` in the
    archiver's batches (1,000 per statement), back to back here (the service
    pauses 1 s every 20 batches); then VACUUM, as autovacuum would after it,
    and a CHECKPOINT so the rounds start alike.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        lsn = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        assert lsn is not None
        t0 = time.perf_counter()
        cursor = Cursor()
        moved = statements = 0
        while True:
            result = archive_once(
                conn, "queue_engine", ARCHIVE_AFTER_S.default, cursor, max_batches=20
            )
            moved += result.moved
            statements += result.batches
            if not result.more:
                break
            if moved and statements % 2000 == 0:
                log(f"{which}: archived {moved:,}")
        seconds = time.perf_counter() - t0
        wal = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (lsn[0],)
        ).fetchone()
        assert wal is not None
        t1 = time.perf_counter()
        conn.execute("VACUUM (ANALYZE) queue_engine.jobs")
        conn.execute("VACUUM (ANALYZE) queue_engine.jobs_archive")
        conn.execute("CHECKPOINT")
        vacuum_s = time.perf_counter() - t1
    print(
        f"archive ({which}): {moved:,} succeeded jobs moved in {seconds:,.1f} s"
        f" ({moved / max(seconds, 1e-9):,.0f} jobs/s, {statements:,} statements,"
        f" WAL {float(wal[0]) / max(moved, 1):,.0f} B/job); VACUUM + CHECKPOINT {vacuum_s:,.1f} s"
    )


def drain_figures(
    t: Target, admin: psycopg.Connection[Any], n: int, k: int, timeout: float, figures: Figures
) -> None:
    """K workers drain N jobs of queue bench."""
    ids = enqueue_noops(t.dsn, n)
    with psycopg.connect(t.dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        db.pss_reset(admin, t.oid)
        worker_bin = t.bin_dir / "queue-claim-worker"
        cpu = drain(conn, t.dsn, k, left=bench_left, timeout=timeout, worker_bin=worker_bin)
        done, seconds = finished_span(conn, ids)
    if done != n:
        log(f"warning: {t.which}: only {done} of {n} jobs succeeded")
    worker = db.pss_totals(admin, t.oid, WORKER_STATEMENT)
    p = t.label
    per_job = 1000 / max(done, 1)
    figures.add(f"{p}drain K={k} (jobs/s)", t.which, done / seconds, rate=True)
    figures.add(f"{p}claim+finish server ms/job K={k}", t.which, worker.total_ms / max(done, 1))
    figures.add(f"{p}server CPU ms/job K={k}", t.which, cpu.server_cpu_s * per_job)
    figures.add(f"{p}worker CPU ms/job K={k}", t.which, cpu.worker_cpu_s * per_job)
    figures.add(f"{p}claim+finish buffers/job K={k}", t.which, worker.buffers / max(done, 1))


CTL_COMMANDS: dict[str, list[str]] = {
    "stats": ["stats"],
    "workers": ["workers"],
    "top": ["top", "--iterations", "1"],
    "list": ["list"],
}


def ctl_figures(t: Target, admin: psycopg.Connection[Any], repeat: int, figures: Figures) -> None:
    """End-to-end and server time of each queue-ctl view (median of ``repeat``)."""
    base = [str(BIN / "queue-ctl"), "--dsn", t.dsn]
    wall = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([*base, "--version"], check=True, stdout=subprocess.DEVNULL)
        wall.append((time.perf_counter() - t0) * 1000)
    figures.add("queue-ctl --version e2e ms (startup)", t.which, statistics.median(wall))
    for name, argv in CTL_COMMANDS.items():
        wall, server, slowest = [], [], []
        for _ in range(repeat):
            db.pss_reset(admin, t.oid)
            t0 = time.perf_counter()
            subprocess.run(
                [*base, *argv], check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL
            )
            wall.append((time.perf_counter() - t0) * 1000)
            server.append(db.pss_totals(admin, t.oid).total_ms)
            slowest.append(db.pss_slowest(admin, t.oid))
        figures.add(f"queue-ctl {name} e2e ms", t.which, statistics.median(wall))
        figures.add(f"queue-ctl {name} server ms", t.which, statistics.median(server))
        worst = max(slowest)
        if worst[0] > CTL_BAR_MS / 4:
            log(f"{t.which}: queue-ctl {name}: slowest statement {worst[0]:.1f} ms: {worst[1]}")


#: Parameters of the view statements --compare-sql can time (every filter off).
VIEW_PARAMS: dict[str, dict[str, Any]] = {
    "stats_queues": {"now": None, "queue": None, "dead_after_s": 30.0, "cap": 10_000},
    "stats_workers": {"dead_after_s": 30.0},
}


def explain_ms(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> float:
    """Server execution time of one run of ``statement`` (EXPLAIN ANALYZE, rolled back)."""
    with conn.transaction(force_rollback=True):
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params).fetchone()
    assert row is not None
    return float(row[0][0]["Execution Time"])


def compare_figures(t: Target, spec: str, repeat: int, figures: Figures) -> None:
    """This build's NAME.sql against an older text of it, alternated, median of ``repeat``."""
    name, _, path = spec.partition("=")
    current = queries.query(name, "queue_engine")
    older = queries.render(Path(path).read_text(), "queue_engine")
    params = VIEW_PARAMS[name]
    with psycopg.connect(t.dsn, autocommit=True) as conn:
        now, before = [], []
        for _ in range(repeat):
            before.append(explain_ms(conn, older, params))
            now.append(explain_ms(conn, current, params))
    figures.add(f"{name} server ms, base SQL", t.which, statistics.median(before))
    figures.add(f"{name} server ms, this build", t.which, statistics.median(now))


# -- pruner phase ---------------------------------------------------------------------


def every(interval: float, stop: threading.Event, step: Callable[[], None]) -> None:
    """Call ``step`` every ``interval`` seconds (catching up a late tick) until ``stop``."""
    next_at = time.monotonic()
    while not stop.is_set():
        step()
        next_at += interval
        stop.wait(max(0.0, next_at - time.monotonic()))


def prune_phase(
    t: Target,
    admin: psycopg.Connection[Any],
    seconds: float,
    rate: int,
    drain_jobs: int,
    interval: float,
) -> dict[str, float]:
    """The pruner against a stream of expired jobs, beside 2 draining workers."""
    stop = threading.Event()
    fed = [0]
    lock_wait_ms = [0.0]
    feed_sql = db.load_sql("feed_expired")
    tick = 0.1
    per_tick = max(1, int(rate * tick))

    def feed() -> None:
        with psycopg.connect(t.dsn, autocommit=True) as c:
            c.execute("SET synchronous_commit = off")

            def step() -> None:
                c.execute(feed_sql, {"n": per_tick, "age_s": 8 * 86400})
                fed[0] += per_tick

            every(tick, stop, step)

    def watch_locks() -> None:
        with psycopg.connect(t.dsn, autocommit=True) as c:

            def step() -> None:
                row = c.execute(
                    "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - query_start)), 0)"
                    " FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                ).fetchone()
                lock_wait_ms[0] = max(lock_wait_ms[0], float(row[0]) * 1000 if row else 0.0)

            every(0.02, stop, step)

    enqueue_noops(t.dsn, drain_jobs)
    db.pss_reset(admin, t.oid)
    threads = [threading.Thread(target=feed), threading.Thread(target=watch_locks)]
    procs = start_workers(t.dsn, 2)
    pruned = batches = 0
    busy = 0.0
    with psycopg.connect(t.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        phase_start = row[0]
        for th in threads:
            th.start()
        t0 = time.monotonic()
        try:
            # As the orchestrator's Pruner: a run of up to MAX_BATCHES_DEFAULT batches,
            # then CATCH_UP_DEFAULT_S while rows are left, else the interval.
            stop.wait(1.0)
            while time.monotonic() - t0 < seconds:
                t1 = time.monotonic()
                result = prune_once(
                    conn,
                    "queue_engine",
                    Retention(),
                    batch_size=BATCH_SIZE_DEFAULT,
                    max_batches=MAX_BATCHES_DEFAULT,
                )
                busy += time.monotonic() - t1
                pruned += result.jobs_total
                batches += result.batches
                pause = CATCH_UP_DEFAULT_S if result.more else interval
                time.sleep(max(0.0, min(pause, seconds - (time.monotonic() - t0))))
            elapsed = time.monotonic() - t0
        finally:
            stop.set()
            for th in threads:
                th.join()
            stop_workers(procs)
        # The fed rows (finished_at = insert time - 8 days) the pruner left.
        expired = conn.execute(
            "SELECT count(*) FROM queue_engine.jobs"
            " WHERE finished_at >= %s::timestamptz - interval '8 days 1 second'"
            " AND claimed_by = 'worker-feed.example.com:1:a1b2c3d4'",
            (phase_start,),
        ).fetchone()
    prune = db.pss_totals(admin, t.oid, PRUNE_STATEMENT)
    worker = db.pss_totals(admin, t.oid, WORKER_STATEMENT)
    return {
        "fed/s": fed[0] / elapsed,
        "pruned/s": pruned / elapsed,
        "pruned/s while running": pruned / max(busy, 1e-9),
        "batches": float(batches),
        "fed rows still unpruned": float(expired[0]) if expired else -1.0,
        "prune stmt ms/batch": prune.total_ms / max(prune.calls, 1),
        "prune stmt max ms": prune.max_ms,
        "prune WAL kB/batch": prune.wal_bytes / max(prune.calls, 1) / 1024,
        "worker stmt mean ms": worker.total_ms / max(worker.calls, 1),
        "worker stmt max ms": worker.max_ms,
        "longest lock wait ms": lock_wait_ms[0],
    }


# -- main -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dsn", default="", help="admin DSN (CREATEDB); default: embedded server")
    parser.add_argument("--data-dir", default="", help="keep the embedded server's folder here")
    parser.add_argument(
        "--reuse", action="store_true", help="keep an existing big database (no fill)"
    )
    parser.add_argument("--finished", type=int, default=10_000_000)
    parser.add_argument("--queued", type=int, default=1_000_000)
    parser.add_argument("--span-days", type=float, default=90.0)
    parser.add_argument("--chunk", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--drain-jobs", type=int, default=10_000)
    parser.add_argument("--workers", default="2,4")
    parser.add_argument("--single", type=int, default=2_000)
    parser.add_argument("--bulk", type=int, default=20_000)
    parser.add_argument("--ctl-repeat", type=int, default=3)
    parser.add_argument("--prune-seconds", type=float, default=150.0)
    parser.add_argument(
        "--prune-interval",
        type=float,
        default=PRUNE_INTERVAL_DEFAULT_S,
        help="seconds between pruner runs with nothing left (QUEUE_ENGINE_PRUNE_S)",
    )
    parser.add_argument("--prune-rate", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated parts to leave out: archive, enqueue, drain, ctl, prune, vacuum",
    )
    parser.add_argument(
        "--compare-sql",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="also time queue_engine/foundation/sql/NAME.sql against the statement in PATH (an older"
        " version), server-side, each round (repeatable; NAME: stats_queues or stats_workers)",
    )
    parser.add_argument(
        "--jobs-vacuum-threshold",
        type=int,
        default=0,
        help="set autovacuum_vacuum_scale_factor = 0 and this threshold on jobs in both"
        " databases (the operations guide's advice for big tables); 0: the migration's",
    )
    parser.add_argument(
        "--base-schema",
        type=int,
        default=0,
        help="A/B of schema versions: each round measures both databases migrated down to"
        " this version ('base ' figures, workers from --base-bin) and up to this build's"
        " ('new ' figures); enqueue and drain are measured",
    )
    parser.add_argument(
        "--base-bin",
        default="",
        help="bin folder of the base build's venv (its queue-claim-worker waits for its own"
        " schema version); default: this build's",
    )
    opts = parser.parse_args()
    skip = {x for x in opts.skip.split(",") if x}
    ks = [int(x) for x in opts.workers.split(",") if x]

    with server(opts.dsn, settings=db.SERVER_SETTINGS, data_dir=opts.data_dir) as admin_dsn:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        print(
            describe(
                admin_dsn,
                *("fsync", "synchronous_commit", "shared_buffers", "max_wal_size"),
                *("autovacuum_naptime", "checkpoint_timeout"),
            )
        )
        empty_dsn = recreate(admin_dsn, db.EMPTY_DB)
        if opts.reuse and db.exists(admin_dsn, db.BIG_DB):
            big_dsn = make_conninfo(admin_dsn, dbname=db.BIG_DB)
            log("reusing the big database (no fill)")
        else:
            big_dsn = recreate(admin_dsn, db.BIG_DB)
            took = db.fill(big_dsn, opts.finished, opts.queued, opts.chunk, opts.span_days)
            print(
                f"fill: {opts.finished:,} finished + {opts.queued:,} queued jobs in {took:,.0f} s"
            )
        if opts.reuse:
            db.migrate_to(big_dsn, None)  # a big database filled by an older build
        if opts.jobs_vacuum_threshold:
            for dsn in (empty_dsn, big_dsn):
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(
                        psql.SQL(
                            "ALTER TABLE queue_engine.jobs SET (autovacuum_vacuum_scale_factor = 0,"
                            " autovacuum_vacuum_threshold = {})"
                        ).format(psql.Literal(opts.jobs_vacuum_threshold))
                    )
            print(
                f"jobs: autovacuum_vacuum_scale_factor = 0, threshold = {opts.jobs_vacuum_threshold}"
            )
        if "archive" not in skip:
            for which, dsn in (("empty", empty_dsn), ("big", big_dsn)):
                archive_phase(which, dsn)
        targets = [
            db_target("empty", empty_dsn, admin_dsn, db.EMPTY_DB),
            db_target("big", big_dsn, admin_dsn, db.BIG_DB),
        ]
        with psycopg.connect(big_dsn) as conn:
            counted = conn.execute(
                "SELECT sum(reltuples)::bigint FROM pg_class WHERE oid IN"
                " ('queue_engine.jobs'::regclass, 'queue_engine.jobs_archive'::regclass)"
            ).fetchone()
            big_rows = max(1, int(counted[0]) if counted else 1)
            sizes_big = db.sizes(conn)
        print(
            f"\nsizes of the big database ({big_rows:,} jobs in jobs and jobs_archive, estimate), MB and MB per million jobs"
        )
        for name, size in sizes_big:
            print(f"  {name:<40}{size / 2**20:>10,.1f}{size / 2**20 / big_rows * 1e6:>10,.1f}")

        figures = Figures()
        if opts.base_schema:
            ab_rounds(opts, skip, targets, admin_dsn, ks, figures)
            return
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            for rnd in range(1, opts.rounds + 1):
                for t in targets:
                    log(f"round {rnd}: {t.which}")
                    if "enqueue" not in skip:
                        enqueue_figures(t, admin, opts.single, opts.bulk, figures)
                    if "drain" not in skip:
                        for k in ks:
                            drain_figures(t, admin, opts.drain_jobs, k, opts.timeout, figures)
                    if "ctl" not in skip:
                        ctl_figures(t, admin, opts.ctl_repeat, figures)
                    for spec in opts.compare_sql:
                        compare_figures(t, spec, opts.ctl_repeat, figures)
            report(figures)
            flat_check(figures)
            if "prune" in skip:
                return
            print(
                f"\npruner phase: {opts.prune_seconds:g} s, {opts.prune_rate:,} expired jobs/s fed,"
                f" 2 workers draining, pruner interval {opts.prune_interval:g} s\n{'':<32}{'empty':>12}{'big':>12}"
            )
            phase = {
                t.which: prune_phase(
                    t, admin, opts.prune_seconds, opts.prune_rate, 20_000, opts.prune_interval
                )
                for t in targets
            }
            for key in phase["empty"]:
                print(f"  {key:<30}{phase['empty'][key]:>12,.1f}{phase['big'][key]:>12,.1f}")

        print(
            "\nautovacuum: per table live, dead, autovacuums, autoanalyzes, ins, upd, hot upd, del"
        )
        for t in targets:
            with psycopg.connect(t.dsn, autocommit=True) as conn:
                for row in db.table_stats(conn):
                    print(
                        f"  {t.which:<6}"
                        + " ".join(f"{v:>12,}" if isinstance(v, int) else f"{v:<12}" for v in row)
                    )
                took_s = db.timed_vacuum(conn)
                print(
                    f"  {t.which:<6}plain VACUUM: "
                    + ", ".join(f"{k} {v:.2f} s" for k, v in took_s.items())
                )


def ab_rounds(
    opts: argparse.Namespace,
    skip: set[str],
    targets: list[Target],
    admin_dsn: str,
    ks: list[int],
    figures: Figures,
) -> None:
    """Enqueue and drain figures of two schema versions, alternated in every round (base, then new).

    The schema is moved down or up on both databases before each half (for a
    migration that only sets table options, a moment's work). What one half
    leaves in the tables (dead index entries, say) the other inherits: a base
    half that follows a new one starts cleaner than base would stay on its own.
    """
    base_bin = Path(opts.base_bin) if opts.base_bin else BIN
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        for rnd in range(1, opts.rounds + 1):
            for label, version, bin_dir in (
                ("base ", opts.base_schema, base_bin),
                ("new ", None, BIN),
            ):
                for t in targets:
                    db.migrate_to(t.dsn, version)
                for t in targets:
                    with psycopg.connect(t.dsn) as conn:
                        log(f"round {rnd}: {label}{t.which}: jobs ({db.jobs_options(conn)})")
                    half = Target(t.which, t.dsn, t.oid, label, bin_dir)
                    if "enqueue" not in skip:
                        enqueue_figures(half, admin, opts.single, opts.bulk, figures)
                    if "drain" not in skip:
                        for k in ks:
                            drain_figures(half, admin, opts.drain_jobs, k, opts.timeout, figures)
    for t in targets:
        db.migrate_to(t.dsn, None)
    report(figures)
    flat_check(figures)


def db_target(which: str, dsn: str, admin_dsn: str, name: str) -> Target:
    return Target(which, dsn, db.dboid(admin_dsn, name))


def flat_check(figures: Figures) -> None:
    """Name each figure over the bars: ratio > 1.3 (rates and per-job costs) or ctl server > 200 ms."""
    print()
    for name, per in figures.values.items():
        if "empty" not in per or "big" not in per:
            continue
        me, mb = statistics.median(per["empty"]), statistics.median(per["big"])
        if (name.startswith("queue-ctl") and name.endswith("server ms")) or "server ms, " in name:
            verdict = "ok" if mb < CTL_BAR_MS else f"OVER {CTL_BAR_MS:.0f} ms"
        elif name.startswith("queue-ctl") or "CPU" in name:
            continue
        else:
            r = ratio(name, me, mb, figures.rates)
            verdict = "flat" if r <= FLAT else f"NOT FLAT ({r:.2f}x > {FLAT}x)"
        print(f"  {name:<46}{verdict}")


if __name__ == "__main__":
    main()
