"""``queue-ctl demo``: the whole engine, end to end, in about ten seconds.

With no DSN it starts an embedded Postgres (durable default settings, in a
temp folder); with ``--dsn`` it uses that database. Then it runs what a
deployment runs — one ``queue-orchestrator`` (which migrates) and two
``queue-claim-worker --queue=demo --app queue_engine.demo.app`` processes —
enqueues a handful of jobs that each show one behaviour (success, a failure
retried after a fixed backoff, a generator reporting progress, two jobs sharing
a ``lock_key``, a delayed job, an idempotent re-enqueue), shows live progress,
prints a summary with what happened, and stops everything in order: workers
and orchestrator with SIGTERM (SIGKILL after a timeout), then the embedded
Postgres. Ctrl-C stops everything the same way. The run is bounded by
``--timeout``; jobs still unfinished then make the exit code 1.

With ``--workflow`` the same daemons run one workflow instead of the sample
jobs (fan-out, fan-in and an input node the demo provides itself; see
:mod:`queue_engine.demo.workflow`), and the run ends by drawing its DAG;
it exits 0 when the workflow succeeded.
"""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import psycopg
from psycopg.rows import dict_row

from queue_engine.cli.common import embedded_folder_options, use_color
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.fleet import Fleet
from queue_engine.demo import sql as queries
from queue_engine.demo import workflow as demo_workflow
from queue_engine.foundation import localfleet
from queue_engine.foundation.config import DEFAULT_SCHEMA
from queue_engine.foundation.db import connect, describe_dsn
from queue_engine.foundation.embedded import database_for
from queue_engine.foundation.errors import QueueEngineError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, schema_version
from queue_engine.producer.client import Client
from queue_engine.producer.jobs import FINISHED_STATUSES, JobStatus
from queue_engine.producer.workflows.model import WorkflowState

DEMO_QUEUE = "demo"
DEMO_APP = "queue_engine.demo.app"
REFRESH_S = 0.3
PROGRESS_STEPS = 12
DELAY_S = 2.0
LOCK_KEY = "demo:printer"
BAR_WIDTH = 20


class DemoFailed(QueueEngineError):
    """The demo could not complete (a daemon died, or the jobs did not finish in time)."""


@dataclass(frozen=True, slots=True)
class DemoJob:
    """A job the demo enqueued and what it is meant to show."""

    id: int
    task: str
    shows: str


class Screen:
    """The live status line: rewritten in place on a terminal, printed when it changes otherwise."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.last = ""

    def show(self, line: str, elapsed_s: float) -> None:
        """Display the status; on a pipe only when it changed, so logs stay short."""
        if self.tty:
            click.echo(f"\r\033[K{elapsed_s:5.1f}s  {line}", nl=False)
        elif line != self.last:
            click.echo(f"{elapsed_s:5.1f}s  {line}")
        self.last = line

    def done(self) -> None:
        """End the in-place line."""
        if self.tty and self.last:
            click.echo("")


def _wait_for_schema(dsn: str, schema: str, fleet: Fleet, deadline: float) -> None:
    """Wait until the orchestrator has migrated, failing early if a daemon died."""
    while True:
        version = 0
        try:
            with connect(dsn) as conn:
                version = schema_version(conn, schema)
        except QueueEngineError:
            pass
        if version >= ENGINE_SCHEMA_VERSION:
            return
        _check_fleet(fleet)
        if time.monotonic() > deadline:
            raise DemoFailed("the orchestrator did not migrate the database in time")
        time.sleep(0.2)


def _check_fleet(fleet: Fleet) -> None:
    dead = fleet.dead()
    if dead:
        child = dead[0]
        raise DemoFailed(
            f"{child.name} (pid {child.pid}) exited with code {child.exited()}; "
            f"its log ends with:\n{child.tail()}"
        )


def _enqueue(client: Client, run: str) -> list[DemoJob]:
    """Enqueue the sample jobs, through the single, bulk and keyed paths."""
    jobs: list[DemoJob] = []
    ids = client.enqueue_many(
        [
            {"task": "demo.hello", "queue": DEMO_QUEUE, "args": {"name": name}}
            for name in ("alice", "bob", "carol")
        ]
    )
    jobs += [DemoJob(i, "demo.hello", "bulk enqueue, plain success") for i in ids]
    click.echo(f"enqueued {len(ids)} demo.hello jobs in one statement (bulk): {ids}")

    flaky = client.enqueue("demo.flaky", queue=DEMO_QUEUE, max_attempts=3)
    jobs.append(DemoJob(flaky.id, "demo.flaky", "fails once, retried after 1 s"))
    click.echo(f"enqueued demo.flaky (job {flaky.id}): its first attempt raises")

    progress = client.enqueue(
        "demo.progress", queue=DEMO_QUEUE, args={"steps": PROGRESS_STEPS, "step_s": 0.25}
    )
    jobs.append(DemoJob(progress.id, "demo.progress", "generator reporting progress"))
    click.echo(f"enqueued demo.progress (job {progress.id}): a generator yielding progress")

    for n in (1, 2):
        job = client.enqueue("demo.locked", queue=DEMO_QUEUE, args={"n": n}, lock_key=LOCK_KEY)
        jobs.append(DemoJob(job.id, "demo.locked", f"lock_key {LOCK_KEY!r}"))
    click.echo(f"enqueued 2 demo.locked jobs sharing lock_key {LOCK_KEY!r}: never run together")

    delayed = client.enqueue("demo.report", queue=DEMO_QUEUE, delay=DELAY_S)
    jobs.append(DemoJob(delayed.id, "demo.report", f"delayed {DELAY_S:g} s"))
    click.echo(f"enqueued demo.report delayed by {DELAY_S:g} s (job {delayed.id})")

    key = f"demo-welcome-{run}"
    first = client.enqueue(
        "demo.hello", queue=DEMO_QUEUE, args={"name": "again"}, idempotency_key=key
    )
    again = client.enqueue(
        "demo.hello", queue=DEMO_QUEUE, args={"name": "again"}, idempotency_key=key
    )
    jobs.append(DemoJob(first.id, "demo.hello", "idempotency key"))
    click.echo(
        f"enqueued demo.hello with idempotency key {key!r} twice: job {first.id} "
        f"(created={first.created}), then job {again.id} again (created={again.created})"
    )
    return jobs


def _rows(conn: psycopg.Connection[Any], schema: str, ids: list[int]) -> dict[int, dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("job_summary", schema), {"ids": ids})
        return {int(r["id"]): r for r in cur.fetchall()}


def _status_line(rows: dict[int, dict[str, Any]], progress_id: int) -> str:
    counts: dict[str, int] = {}
    for row in rows.values():
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    order = [s.value for s in JobStatus]
    parts = [f"{s} {counts[s]}" for s in order if counts.get(s)]
    progress = rows.get(progress_id, {}).get("progress") or {}
    done, total = int(progress.get("done", 0)), int(progress.get("total", PROGRESS_STEPS))
    filled = BAR_WIDTH * done // max(total, 1)
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    return "  ".join(parts) + f"  | progress [{bar}] {done}/{total}"


def _duration(row: dict[str, Any]) -> str:
    if row.get("duration_ms") is not None:
        return f"{row['duration_ms'] / 1000:.2f}s"
    if row.get("started_at") and row.get("finished_at"):
        return f"{(row['finished_at'] - row['started_at']).total_seconds():.2f}s"
    return "-"


def _clock(value: datetime | None) -> str:
    return value.strftime("%H:%M:%S.%f")[:-3] if value else "?"


def _print_summary(jobs: list[DemoJob], rows: dict[int, dict[str, Any]]) -> None:
    click.echo("")
    click.echo(f"{'ID':>6}  {'TASK':<14} {'STATUS':<10} {'ATTEMPTS':>8}  {'DURATION':>8}  SHOWS")
    for job in jobs:
        row = rows.get(job.id, {})
        attempts = f"{row.get('attempt', '?')}/{row.get('max_attempts', '?')}"
        click.echo(
            f"{job.id:>6}  {job.task:<14} {row.get('status', '?'):<10} {attempts:>8}  "
            f"{_duration(row):>8}  {job.shows}"
        )
    click.echo("")
    for job in jobs:
        row = rows.get(job.id, {})
        if job.task == "demo.flaky" and row.get("failures"):
            click.echo(
                f"retry:    job {job.id} failed attempt 1 ({row['failures'][0]}), "
                f"then {row.get('status')} on attempt {row.get('attempt')}"
            )
        if job.task == "demo.progress" and row.get("progress"):
            click.echo(f"progress: job {job.id} last reported {json.dumps(row['progress'])}")
        if job.task == "demo.report":
            wait = row["started_at"] - row["created_at"] if row.get("started_at") else None
            click.echo(
                f"delayed:  job {job.id} enqueued at {_clock(row.get('created_at'))}, "
                f"started at {_clock(row.get('started_at'))}"
                + (f" ({wait.total_seconds():.1f} s later)" if wait else "")
            )
    locked = [rows.get(j.id, {}) for j in jobs if j.task == "demo.locked"]
    if len(locked) == 2 and all(r.get("finished_at") for r in locked):
        a, b = sorted(locked, key=lambda r: r["started_at"])
        overlap = b["started_at"] < a["finished_at"]
        click.echo(
            f"lock_key: job {a['id']} ran {_clock(a['started_at'])}-{_clock(a['finished_at'])}, "
            f"job {b['id']} {_clock(b['started_at'])}-{_clock(b['finished_at'])}: "
            + ("OVERLAP (unexpected)" if overlap else "one after the other")
        )


def _run_jobs(
    url: str,
    schema: str,
    fleet: Fleet,
    started: float,
    deadline: float,
    timeout: float,
    log_dir: Path,
) -> None:
    """Enqueue the sample jobs, show their progress live, print the summary; raise unless all succeeded."""
    with connect(url) as conn:
        jobs = _enqueue(Client(conn=conn, schema=schema), secrets.token_hex(4))
        ids = [j.id for j in jobs]
        progress_id = next(j.id for j in jobs if j.task == "demo.progress")
        screen = Screen(sys.stdout.isatty())
        rows = _rows(conn, schema, ids)
        try:
            while True:
                rows = _rows(conn, schema, ids)
                screen.show(_status_line(rows, progress_id), time.monotonic() - started)
                if all(r["status"] in FINISHED_STATUSES for r in rows.values()):
                    break
                _check_fleet(fleet)
                if time.monotonic() > deadline:
                    break
                time.sleep(REFRESH_S)
        finally:
            screen.done()
        _print_summary(jobs, rows)
    unfinished = [i for i, r in rows.items() if r["status"] not in FINISHED_STATUSES]
    failed = [i for i, r in rows.items() if r["status"] != JobStatus.SUCCEEDED]
    if unfinished:
        raise DemoFailed(
            f"{len(unfinished)} job(s) not finished after {timeout:g} s: {unfinished} "
            f"(daemon logs in {log_dir})"
        )
    if failed:
        raise DemoFailed(f"job(s) {failed} did not succeed (daemon logs in {log_dir})")


def _run_workflow(
    url: str,
    schema: str,
    fleet: Fleet,
    started: float,
    deadline: float,
    timeout: float,
    log_dir: Path,
) -> None:
    """Run the demo workflow (``--workflow``) and draw it; raise unless it succeeded."""
    with connect(url) as conn:
        info = demo_workflow.run(
            Client(conn=conn, schema=schema),
            DEMO_QUEUE,
            screen=Screen(sys.stdout.isatty()),
            check=lambda: _check_fleet(fleet),
            started=started,
            deadline=deadline,
            color=use_color("auto"),
        )
    if info.state == WorkflowState.RUNNING:
        raise DemoFailed(
            f"workflow {info.id} not finished after {timeout:g} s (daemon logs in {log_dir})"
        )
    if info.state != WorkflowState.SUCCEEDED:
        raise DemoFailed(f"workflow {info.id} ended {info.state} (daemon logs in {log_dir})")


@click.command()
@click.option(
    "--dsn",
    "local_dsn",
    default=None,
    help="Database to use (overrides queue-ctl --dsn); none: an embedded Postgres.",
)
@embedded_folder_options
@click.option("--workers", type=click.IntRange(1, 16), default=2, show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(min=5),
    default=60.0,
    show_default=True,
    help="Give up (exit 1) if the jobs are not finished after this many seconds.",
)
@click.option(
    "--workflow",
    "workflow",
    is_flag=True,
    help="Run one workflow (fan-out, fan-in, an input node) instead, and draw its DAG.",
)
@pass_cli
def demo(
    cli: CliContext,
    local_dsn: str | None,
    data_dir: Path | None,
    keep: bool,
    workers: int,
    timeout: float,
    workflow: bool,
) -> int:
    """Run orchestrator + workers on sample jobs, with live progress and a summary."""
    started = time.monotonic()
    deadline = started + timeout
    schema = cli.given_schema or DEFAULT_SCHEMA
    dsn = local_dsn or cli.given_dsn
    # SIGTERM stops the demo like Ctrl-C: the finally blocks below stop the children.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    fleet_found = None if dsn or data_dir else localfleet.find()
    if fleet_found is not None:
        dsn, schema = fleet_found.dsn, cli.given_schema or fleet_found.schema
        click.echo(f"no DSN configured: using {fleet_found.describe()}: {dsn}")
    elif not dsn:
        click.echo("no DSN configured: starting an embedded Postgres ...")
    log_dir = Path(tempfile.mkdtemp(prefix="queue-engine-demo-logs-"))
    ok = False
    with database_for(dsn, data_dir=data_dir, keep=keep, purpose="demo") as url:
        click.echo(f"database: {describe_dsn(url)} (schema {schema})")
        fleet = Fleet(log_dir, env={"QUEUE_ENGINE_SWEEP_S": "1", "QUEUE_ENGINE_LOG_LEVEL": "INFO"})
        try:
            orch = fleet.start(
                "orchestrator", "queue-orchestrator", "--dsn", url, "--schema", schema
            )
            pids = [
                fleet.start(
                    f"worker-{n}",
                    "queue-claim-worker",
                    f"--queue={DEMO_QUEUE}",
                    "--app",
                    DEMO_APP,
                    "--dsn",
                    url,
                    "--schema",
                    schema,
                ).pid
                for n in range(1, workers + 1)
            ]
            click.echo(f"started queue-orchestrator (pid {orch.pid}) and {workers} workers {pids}")
            _wait_for_schema(url, schema, fleet, deadline)
            if workflow:
                _run_workflow(url, schema, fleet, started, deadline, timeout, log_dir)
            else:
                _run_jobs(url, schema, fleet, started, deadline, timeout, log_dir)
            ok = True
        finally:
            click.echo("stopping workers and orchestrator ...")
            fleet.stop()
            codes = {c.name: c.exited() for c in fleet.children}
            click.echo("stopped: " + ", ".join(f"{n} exit {c}" for n, c in codes.items()))
            if ok and any(c != 0 for c in codes.values()):
                ok = False
                for child in fleet.children:
                    if child.exited() != ExitCode.OK:
                        click.echo(f"--- {child.name} log (tail) ---\n{child.tail()}", err=True)
            if not dsn:
                click.echo("stopping the embedded Postgres ...")
    if ok:
        shutil.rmtree(log_dir, ignore_errors=True)
        click.echo(f"demo finished in {time.monotonic() - started:.1f} s")
        return ExitCode.OK
    raise DemoFailed(f"a daemon did not stop cleanly (logs in {log_dir})")
