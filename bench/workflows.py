"""Workflow overhead against plain jobs, in one run. Not a test: it prints numbers.

Usage::

    python bench/workflows.py                        # embedded durable Postgres, 3 rounds
    python bench/workflows.py --rounds 5 --fan 10000 --chain 1000
    python bench/workflows.py --profile              # + per-function trigger cost
    python bench/workflows.py --only "plain K=4,fan K=4" --no-latency --rounds 30   # the fan's share

Every figure comes from real ``queue-claim-worker`` processes (prefetch 1,
no-op handler ``noop`` of ``lib/tasks.py``), on a fresh migrated
database per measurement (``lib.postgres.fresh_database``), jobs inserted and
``ANALYZE``d before the workers start; jobs/s = jobs / (last ``finished_at`` -
first ``started_at``), from the jobs table. Rounds alternate the scenarios so
drifts of this shared machine hit them all; medians are printed.

  plain K=4      N no-op jobs, 4 workers (the reference for fan-out/fan-in)
  fan K=4        a workflow root -> N parts -> join (N + 2 nodes), 4 workers;
                 the join counts its parents through 16 gates (the design)
  fan-noroot K=4 N parts -> join, no root (N + 1 nodes): the parts are queued
                 from the start, so the fan without its root's release (one
                 statement readying N children while the other workers wait)
                 and without each part's parent in its claim
  fan-generic    (with --compare-generic) the fan with the release function's
                 own plan_cache_mode reset, so it runs with the worker
                 session's force_generic_plan, as before migration 0007 set it
  plain K=1      M no-op jobs, 1 worker (the reference for the chain)
  chain K=1      a workflow of M nodes, each after the one before, 1 worker
  fan-base K=4, chain-base K=1
                 (with --base-sql FILE) the fan and the chain on databases
                 where FILE was run after loading, before the workers start:
                 e.g. another build's trigger and release functions, for an
                 A/B of them in the same run and rounds; with --base-bin,
                 drained by that build's queue-claim-worker (its finish
                 statement)

For each 4-worker drain a sampler reads ``pg_stat_activity`` every 20 ms:
"lock waits" is the share of the workers' busy backends found waiting on a
lock (wait_event_type ``Lock``), by event; deadlocks and commits per job
(the workers' transactions plus this script's and the sampler's polls) come
from ``pg_stat_database``.

Ready latency: with 4 idle workers, small workflows (8 parts -> join, and 32
parts -> join through gates) are started one after another; each gives
join.started_at - max(part.finished_at): from the transaction that ended the
last parent to the one that claimed the child (both are the statements'
``now()``). ``--profile`` adds one fan-out run with ``track_functions = all``
and prints ``pg_stat_user_functions`` for the trigger's functions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from lib.builds import alternated
from lib.postgres import describe, fresh_database, server, server_pids
from lib.timing import cpu_seconds
from lib.workers import QUEUE, enqueue_noops, finished_span, start_workers, stop_workers, unfinished
from psycopg import sql

from queue_engine import Client, Workflow

Conn = psycopg.Connection[Any]
#: The release as it was before it set its own plan_cache_mode: it then ran
#: with the worker session's force_generic_plan.
RELEASE_GENERIC = (
    "ALTER FUNCTION queue_engine.workflow_release(bigint, text, text, text, boolean)"
    " RESET plan_cache_mode"
)


@dataclass
class Drain:
    """One drain: throughput, CPU per job, what the lock sampler saw."""

    jobs: int
    rate: float
    server_ms: float
    worker_ms: float
    lock_share: float
    lock_events: Counter[str] = field(default_factory=Counter)
    deadlocks: int = 0
    #: Transactions committed in the database per job (the workers' statements,
    #: plus the sampler's and this script's polls).
    commits: float = 0.0
    #: WAL bytes written per job during the drain: the work of the statements
    #: themselves, which foreign load on the machine does not change (the polls
    #: write none).
    wal_bytes: float = 0.0


class LockSampler(threading.Thread):
    """Samples the database's client backends every 20 ms: busy, and waiting on a lock."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.stop = threading.Event()
        self.busy = 0
        self.waiting = 0
        self.events: Counter[str] = Counter()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                rows = conn.execute(
                    "SELECT wait_event_type, wait_event FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    " AND backend_type = 'client backend' AND state = 'active'"
                ).fetchall()
                self.busy += len(rows)
                for kind, event in rows:
                    if kind == "Lock":
                        self.waiting += 1
                        self.events[str(event)] += 1
                time.sleep(0.02)


def deadlocks(conn: Conn) -> int:
    row = conn.execute(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def commits(conn: Conn) -> int:
    """Committed transactions of this database (the statistics of this snapshot)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def wal_lsn(conn: Conn) -> int:
    """The server's WAL position in bytes (WAL is cluster-wide: one drain at a time)."""
    row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def drain(
    admin: str, k: int, load: Callable[[str], None], timeout: float, worker_bin: str = ""
) -> Drain:
    """Load a fresh database with ``load``, drain it with K workers, measure.

    ``worker_bin``: the workers of another build (the base of an A/B).
    """
    with fresh_database(admin) as dsn:
        load(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")
            conn.execute("CHECKPOINT")
            dead_before = deadlocks(conn)
            commits_before = commits(conn)
            server_before = cpu_seconds(server_pids(conn))
            wal_before = wal_lsn(conn)
            sampler = LockSampler(dsn)
            sampler.start()
            procs = start_workers(dsn, k, worker_bin=worker_bin)
            try:
                deadline = time.monotonic() + timeout
                while unfinished(conn):
                    if time.monotonic() > deadline:
                        print("  warning: timed out", file=sys.stderr)
                        break
                    time.sleep(0.05)
                server_cpu = cpu_seconds(server_pids(conn)) - server_before
                wal = wal_lsn(conn) - wal_before
                worker_cpu = cpu_seconds([p.pid for p in procs])
            finally:
                sampler.stop.set()
                stop_workers(procs)
                sampler.join()
            time.sleep(0.6)  # the statistics of the workers' last transactions arrive
            committed = commits(conn) - commits_before
            done, seconds = finished_span(conn)
            total = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
            if total and done != total[0]:
                print(f"  warning: only {done} of {total[0]} jobs succeeded", file=sys.stderr)
            return Drain(
                jobs=done,
                rate=done / seconds,
                server_ms=server_cpu / done * 1000,
                worker_ms=worker_cpu / done * 1000,
                lock_share=sampler.waiting / max(1, sampler.busy),
                lock_events=sampler.events,
                deadlocks=deadlocks(conn) - dead_before,
                commits=committed / done,
                wal_bytes=wal / done,
            )


def plain_jobs(n: int) -> Callable[[str], None]:
    def load(dsn: str) -> None:
        enqueue_noops(dsn, n)

    return load


def fan_workflow(n: int, parents: int = 0) -> Workflow:
    """root -> n parts -> join; with ``parents`` > 0, no root: parts -> join only."""
    wf = Workflow(f"fan-{n}")
    root = [] if parents else [wf.add("root", "noop", queue=QUEUE)]
    parts = [wf.add(f"part-{i}", "noop", queue=QUEUE, after=root) for i in range(parents or n)]
    wf.add("join", "noop", queue=QUEUE, after=parts)
    return wf


def fan(
    n: int, *, generic: bool = False, base: str = "", root: bool = True
) -> Callable[[str], None]:
    """The fan-out/fan-in; ``generic``: the release runs with the worker's generic plans.

    ``base``: SQL run after loading (the other side of an A/B of the functions).
    ``root``: False for the parts and the join only.
    """

    def load(dsn: str) -> None:
        with Client(dsn) as client:
            client.start_workflow(fan_workflow(n, 0 if root else n))
        with psycopg.connect(dsn, autocommit=True) as conn:
            if generic:
                conn.execute(RELEASE_GENERIC)
            if base:
                conn.execute(base.encode())

    return load


def chain(n: int, base: str = "") -> Callable[[str], None]:
    def load(dsn: str) -> None:
        wf = Workflow(f"chain-{n}")
        previous: list[str] = []
        for i in range(n):
            previous = [wf.add(f"step-{i}", "noop", queue=QUEUE, after=previous)]
        with Client(dsn) as client:
            client.start_workflow(wf)
        if base:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(base.encode())

    return load


def ready_latency(admin: str, workflows: int, parents: int, timeout: float) -> list[float]:
    """ms from the last parent's finish to the join's start, one sample per workflow."""
    out: list[float] = []
    with fresh_database(admin) as dsn, Client(dsn) as client:
        procs = start_workers(dsn, 4)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                client.enqueue_many([{"task": "noop", "queue": QUEUE} for _ in range(40)])
                deadline = time.monotonic() + timeout
                while unfinished(conn):
                    if time.monotonic() > deadline:
                        raise RuntimeError("warm-up jobs not drained")
                    time.sleep(0.05)
                conn.execute("ANALYZE")
                time.sleep(0.5)  # every worker idle, listening
                for _ in range(workflows):
                    info = client.start_workflow(fan_workflow(0, parents=parents))
                    while client.get_workflow(info.id).state == "running":
                        if time.monotonic() > deadline + workflows:
                            raise RuntimeError("workflow did not end")
                        time.sleep(0.005)
                    row = conn.execute(
                        "SELECT extract(epoch FROM max(j.started_at) FILTER (WHERE j.node = 'join')"
                        " - max(j.finished_at) FILTER (WHERE j.node <> 'join'))"
                        " FROM queue_engine.jobs j WHERE j.workflow_id = %s",
                        (info.id,),
                    ).fetchone()
                    assert row is not None
                    out.append(float(row[0]) * 1000)
                    time.sleep(0.05)
        finally:
            stop_workers(procs)
    return out


def profile(admin: str, n: int, timeout: float) -> list[tuple[Any, ...]]:
    """One fan-out drain with track_functions = all: the trigger functions' calls and times."""
    with fresh_database(admin) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET track_functions = 'all'").format(
                    sql.Identifier(conn.info.dbname)
                )
            )
        fan(n)(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")
            procs = start_workers(dsn, 4)
            try:
                deadline = time.monotonic() + timeout
                while unfinished(conn):
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
            finally:
                stop_workers(procs)
            time.sleep(1.0)  # exiting backends flush their function counters
            return conn.execute(
                "SELECT funcname, calls, round(total_time::numeric, 1), round(self_time::numeric, 1)"
                " FROM pg_stat_user_functions WHERE schemaname = 'queue_engine'"
                " ORDER BY total_time DESC"
            ).fetchall()


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fan", type=int, default=10_000, help="parts of the fan-out/fan-in")
    parser.add_argument("--chain", type=int, default=1_000, help="nodes of the chain")
    parser.add_argument("--latency-workflows", type=int, default=40)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--compare-generic",
        action="store_true",
        help="add 'fan-generic K=4': the release with the worker's generic plans",
    )
    parser.add_argument(
        "--base-sql",
        default="",
        help="add 'fan-base K=4' and 'chain-base K=1': this SQL file run after loading",
    )
    parser.add_argument(
        "--base-bin",
        default="",
        help="the base scenarios' workers: another build's queue-claim-worker (with --base-sql)",
    )
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--only",
        default="",
        help="comma list: run only the scenarios whose name starts so (e.g. 'plain K=1,chain')",
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the ready latency")
    opts = parser.parse_args()
    base = ""
    if opts.base_sql:
        with open(opts.base_sql, encoding="utf-8") as f:
            # A migration's down file as it is, or SQL naming the schema.
            base = f.read().replace("__SCHEMA__", "queue_engine")
    scenarios: dict[str, tuple[int, Callable[[str], None]]] = {
        "plain K=4": (4, plain_jobs(opts.fan + 2)),
        "fan K=4": (4, fan(opts.fan)),
        "fan-noroot K=4": (4, fan(opts.fan, root=False)),
        **({"fan-generic K=4": (4, fan(opts.fan, generic=True))} if opts.compare_generic else {}),
        **({"fan-base K=4": (4, fan(opts.fan, base=base))} if base else {}),
        "plain K=1": (1, plain_jobs(opts.chain)),
        "chain K=1": (1, chain(opts.chain)),
        **({"chain-base K=1": (1, chain(opts.chain, base=base))} if base else {}),
    }
    if opts.only:
        wanted = tuple(x.strip() for x in opts.only.split(",") if x.strip())
        scenarios = {k: v for k, v in scenarios.items() if k.startswith(wanted)}
    results: dict[str, list[Drain]] = {name: [] for name in scenarios}
    latencies: dict[int, list[float]] = {8: [], 32: []}
    with server(opts.dsn) as admin:
        print(describe(admin, "fsync", "synchronous_commit"))
        for r in range(opts.rounds):
            # Alternate the order each round, so no scenario always runs first.
            for name in alternated(list(scenarios), r):
                k, load = scenarios[name]
                worker_bin = opts.base_bin if name.endswith("-base K=" + str(k)) else ""
                d = drain(admin, k, load, opts.timeout, worker_bin)
                results[name].append(d)
                print(
                    f"  round {r + 1} {name:<15} {d.rate:8,.0f} jobs/s  CPU ms/job server "
                    f"{d.server_ms:.3f} workers {d.worker_ms:.3f}  lock waits {d.lock_share:.1%} "
                    f"{dict(d.lock_events)} deadlocks {d.deadlocks} commits/job {d.commits:.2f}"
                    f" WAL B/job {d.wal_bytes:,.0f}",
                    file=sys.stderr,
                )
            for parents in [] if opts.no_latency else latencies:
                sample = ready_latency(admin, opts.latency_workflows, parents, opts.timeout)
                latencies[parents].extend(sample)
                print(
                    f"  round {r + 1} ready latency {parents} -> 1: median {med(sample):.2f} ms",
                    file=sys.stderr,
                )
        print(
            f"\nmedian of {opts.rounds} rounds (min-max): jobs/s, CPU ms per job server / workers,"
            " share of busy backends waiting on a lock"
        )
        for name, ds in results.items():
            rates = [d.rate for d in ds]
            events: Counter[str] = Counter()
            for d in ds:
                events += d.lock_events
            print(
                f"  {name:<15} {med(rates):8,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
                f"  {med([d.server_ms for d in ds]):.3f} / {med([d.worker_ms for d in ds]):.3f}"
                f"  lock waits {med([d.lock_share for d in ds]):.1%} {dict(events)}"
                f"  deadlocks {sum(d.deadlocks for d in ds)}"
                f"  commits/job {med([d.commits for d in ds]):.2f}"
                f"  WAL B/job {med([d.wal_bytes for d in ds]):,.0f}"
            )
        pairs = [
            ("fan K=4", "plain K=4"),
            *([("fan-generic K=4", "plain K=4")] if opts.compare_generic else []),
            ("fan-noroot K=4", "plain K=4"),
            ("chain K=1", "plain K=1"),
            *(
                [
                    ("fan-base K=4", "plain K=4"),
                    ("chain-base K=1", "plain K=1"),
                    ("fan K=4", "fan-base K=4"),
                    ("chain K=1", "chain-base K=1"),
                ]
                if base
                else []
            ),
        ]
        print("\nratios, round by round (median): workflow / plain of the same round")
        for a, b in [(a, b) for a, b in pairs if a in results and b in results]:
            ratios = [x.rate / y.rate for x, y in zip(results[a], results[b], strict=True)]
            print(
                f"  {a} / {b}: {med(ratios):.0%}  (rounds: "
                + ", ".join(f"{x:.0%}" for x in ratios)
                + ")"
            )
        for parents, values in latencies.items():
            if not values:
                continue
            values.sort()
            p90 = values[int(0.9 * (len(values) - 1))] if values else float("nan")
            print(
                f"\nready latency, last of {parents} parents finished -> join started, "
                f"{len(values)} workflows: median {med(values):.2f} ms, p90 {p90:.2f} ms,"
                f" max {max(values):.2f} ms"
            )
        if opts.profile:
            print(f"\ntrigger functions, one fan-out of {opts.fan:,} with track_functions = all:")
            print("  function, calls, total ms, self ms")
            for row in profile(admin, opts.fan, opts.timeout):
                print("  " + ", ".join(str(v) for v in row))


if __name__ == "__main__":
    main()
