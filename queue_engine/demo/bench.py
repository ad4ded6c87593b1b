"""``queue-ctl bench``: how fast this engine is on this machine, like River's ``river bench``.

Three numbers, each measured the way a user would experience it:

1. **enqueue rate** — N no-op jobs bulk-enqueued (1000 per statement) in one
   transaction, jobs/s from the first statement to the commit;
2. **drain throughput** — K real ``queue-claim-worker`` processes, already
   started, registered and idle (so interpreter start-up is not measured), work
   off the N jobs; jobs/s from the first ``started_at`` to the last
   ``finished_at`` recorded in the jobs table, so the clock is the database's;
3. **wake latency** — with the workers idle again, jobs enqueued one at a time
   (each its own commit and NOTIFY) at a steady rate; latency is
   ``started_at - created_at`` per job, reported as p50/p95/p99 in ms.

With no DSN it runs on an embedded Postgres with the server's *default,
durable* settings (fsync on): the figures include the WAL flush every commit
pays in production. The workers are stopped with SIGTERM at the end.
"""

from __future__ import annotations

import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import psycopg
from psycopg.rows import dict_row

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.fleet import Fleet
from queue_engine.demo import sql as queries
from queue_engine.demo.bench_app import QUEUE as BENCH_QUEUE
from queue_engine.foundation import localfleet
from queue_engine.foundation.config import DEFAULT_SCHEMA
from queue_engine.foundation.db import connect, describe_dsn
from queue_engine.foundation.embedded import database_for
from queue_engine.foundation.errors import QueueEngineError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.migrate import Migrator
from queue_engine.producer.client import Client

BENCH_APP = "queue_engine.demo.bench_app"
BENCH_TASK = "bench.noop"
BULK_BATCH = 1000
POLL_S = 0.25


class BenchFailed(QueueEngineError):
    """The benchmark could not complete (a worker died, or the jobs did not finish in time)."""


@dataclass(frozen=True, slots=True)
class RunStats:
    """What ``demo/sql/run_stats.sql`` reports for a range of jobs."""

    total: int
    finished: int
    succeeded: int
    first_started: datetime | None
    last_finished: datetime | None
    latency_ms: list[float] | None


def _stats(conn: psycopg.Connection[Any], schema: str, ids: list[int]) -> RunStats:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            queries.query("run_stats", schema),
            {"queue": BENCH_QUEUE, "first_id": min(ids), "last_id": max(ids)},
        )
        row = cur.fetchone()
    assert row is not None
    return RunStats(**row)


def _wait_finished(
    conn: psycopg.Connection[Any], schema: str, ids: list[int], fleet: Fleet, deadline: float
) -> RunStats:
    """Poll until every job of ``ids`` is finished; fail if a worker died or time ran out."""
    while True:
        stats = _stats(conn, schema, ids)
        if stats.finished >= len(ids):
            return stats
        _check_fleet(fleet)
        if time.monotonic() > deadline:
            raise BenchFailed(
                f"only {stats.finished} of {len(ids)} jobs finished in time (raise --timeout)"
            )
        time.sleep(POLL_S)


def _check_fleet(fleet: Fleet) -> None:
    for child in fleet.dead():
        raise BenchFailed(
            f"{child.name} (pid {child.pid}) exited with code {child.exited()}; "
            f"its log ends with:\n{child.tail()}"
        )


def _wait_ready(conn: psycopg.Connection[Any], schema: str, fleet: Fleet, deadline: float) -> None:
    """Wait until every worker registered as idle (it LISTENs before it registers)."""
    pids = [c.pid for c in fleet.children]
    while True:
        row = conn.execute(
            queries.query("fleet_ready", schema),
            {"pids": pids, "host": socket.gethostname()},
        ).fetchone()
        if row is not None and int(row[0]) >= len(pids):
            return
        _check_fleet(fleet)
        if time.monotonic() > deadline:
            raise BenchFailed("the workers did not become ready in time")
        time.sleep(0.1)


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f} jobs/s" if seconds > 0 else "n/a"


def _server_info(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(queries.plain("server_info")).fetchone()
    assert row is not None
    return f"Postgres {row[0]} (fsync={row[1]}, synchronous_commit={row[2]})"


@click.command()
@click.option(
    "--jobs", "n_jobs", type=click.IntRange(1, 10_000_000), default=10_000, show_default=True
)
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True)
@click.option(
    "--prefetch",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Passed to each worker (claimed jobs held at once).",
)
@click.option(
    "--latency-jobs",
    type=click.IntRange(0, 100_000),
    default=200,
    show_default=True,
    help="Jobs enqueued one at a time to idle workers for the latency figures (0: skip).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=1),
    default=100.0,
    show_default=True,
    help="Enqueue rate (jobs/s) of the latency phase.",
)
@click.option(
    "--worker-synchronous-commit",
    type=click.Choice(["on", "off"]),
    default=None,
    help="Workers' session synchronous_commit (default: the worker's own default).",
)
@click.option(
    "--dsn",
    "local_dsn",
    default=None,
    help="Database to use (overrides queue-ctl --dsn); none: an embedded, durable Postgres.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of the embedded Postgres (default: a temp folder, deleted afterwards).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=5),
    default=600.0,
    show_default=True,
    help="Give up (exit 1) when a phase is not done after this many seconds.",
)
@pass_cli
def bench(
    cli: CliContext,
    n_jobs: int,
    workers: int,
    prefetch: int,
    latency_jobs: int,
    rate: float,
    worker_synchronous_commit: str | None,
    local_dsn: str | None,
    data_dir: Path | None,
    timeout: float,
) -> int:
    """Measure enqueue rate, drain throughput and wake latency with real worker processes."""
    schema = cli.given_schema or DEFAULT_SCHEMA
    dsn = local_dsn or cli.given_dsn
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if not dsn:
        click.echo(
            "no DSN configured: starting an embedded Postgres (default, durable settings) ..."
        )
        running = localfleet.find()
        if running is not None:
            click.echo(
                f"(a local fleet runs, queue-ctl up pid {running.pid}: the bench does not load "
                "its database; pass --dsn to bench that one)"
            )
    log_dir = Path(tempfile.mkdtemp(prefix="queue-engine-bench-logs-"))
    env = {"QUEUE_ENGINE_LOG_LEVEL": "WARNING"}
    if worker_synchronous_commit:
        env["QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT"] = worker_synchronous_commit
    with database_for(dsn, data_dir=data_dir, purpose="bench") as url:
        Migrator(url, schema=schema).up()
        fleet = Fleet(log_dir, env=env)
        with connect(url) as conn:
            client = Client(conn=conn, schema=schema)
            click.echo(
                f"bench: {n_jobs:,} jobs, {workers} workers, prefetch {prefetch}, "
                f"worker synchronous_commit={worker_synchronous_commit or 'worker default'}"
            )
            click.echo(f"database: {describe_dsn(url)}, {_server_info(conn)}")
            try:
                for n in range(1, workers + 1):
                    fleet.start(
                        f"worker-{n}",
                        "queue-claim-worker",
                        f"--queue={BENCH_QUEUE}",
                        "--app",
                        BENCH_APP,
                        "--dsn",
                        url,
                        "--schema",
                        schema,
                        "--prefetch",
                        str(prefetch),
                    )
                _wait_ready(conn, schema, fleet, time.monotonic() + min(timeout, 60))

                # 1. Enqueue, in one transaction: the workers see every job at the commit.
                items = [{"task": BENCH_TASK, "queue": BENCH_QUEUE}] * n_jobs
                ids: list[int] = []
                began = time.perf_counter()
                with conn.transaction():
                    for start in range(0, n_jobs, BULK_BATCH):
                        ids += client.enqueue_many(items[start : start + BULK_BATCH])
                enqueue_s = time.perf_counter() - began
                click.echo(
                    f"enqueue:  {n_jobs:,} jobs in {enqueue_s:.2f} s = {_rate(n_jobs, enqueue_s)} "
                    f"(bulk, {BULK_BATCH} per statement, one commit)"
                )

                # 2. Drain, timed by the database's own timestamps.
                stats = _wait_finished(conn, schema, ids, fleet, time.monotonic() + timeout)
                assert stats.first_started is not None and stats.last_finished is not None
                drain_s = (stats.last_finished - stats.first_started).total_seconds()
                click.echo(
                    f"drain:    {n_jobs:,} jobs in {drain_s:.2f} s = {_rate(n_jobs, drain_s)} "
                    f"({workers} workers; first started_at to last finished_at)"
                )
                failed = n_jobs - stats.succeeded

                # 3. Wake latency: one job at a time, at a steady rate, to idle workers.
                if latency_jobs:
                    lat_ids: list[int] = []
                    next_at = time.monotonic()
                    for _ in range(latency_jobs):
                        pause = next_at - time.monotonic()
                        if pause > 0:
                            time.sleep(pause)
                        lat_ids.append(client.enqueue(BENCH_TASK, queue=BENCH_QUEUE).id)
                        next_at += 1 / rate
                    lat = _wait_finished(conn, schema, lat_ids, fleet, time.monotonic() + timeout)
                    p50, p95, p99 = lat.latency_ms or [float("nan")] * 3
                    click.echo(
                        f"latency:  {latency_jobs} jobs at {rate:g}/s to idle workers: "
                        f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, p99 {p99:.1f} ms "
                        "(started_at - created_at)"
                    )
                    failed += latency_jobs - lat.succeeded
            finally:
                fleet.stop()
        codes = [c.exited() for c in fleet.children]
        click.echo(f"workers stopped with SIGTERM: exit codes {codes}")
    if failed:
        raise BenchFailed(f"{failed} job(s) did not succeed (worker logs in {log_dir})")
    if any(code != ExitCode.OK for code in codes):
        raise BenchFailed(f"a worker did not stop cleanly (logs in {log_dir})")
    shutil.rmtree(log_dir, ignore_errors=True)
    return ExitCode.OK
