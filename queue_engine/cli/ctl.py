"""``queue-ctl``: the operator and developer command line.

This module is the group (``--dsn``, ``--schema``), the job and migration
commands, and the list of the other subcommands, which live in their own
modules. Imports run one way: ``ctl`` imports the subcommand modules, they
import :mod:`~queue_engine.cli.context`, :mod:`~queue_engine.cli.render` and
:mod:`~queue_engine.cli.common`, and nothing imports ``ctl``.

Each subcommand opens one connection (through the group's
:class:`~queue_engine.cli.context.CliContext`), does one thing, and exits.
Errors are one line on stderr with the exit codes of
:mod:`queue_engine.cli.common`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from queue_engine.cli import render
from queue_engine.cli.bench import bench
from queue_engine.cli.common import dsn_option, parse_json_args, run_cli, schema_option
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.controls import (
    controls_cmd,
    park_cmd,
    pause_cmd,
    rate_cmd,
    resume_cmd,
    scale_cmd,
    stop_cmd,
    unpark_cmd,
)
from queue_engine.cli.demo import demo
from queue_engine.cli.prune import prune
from queue_engine.cli.render import print_json
from queue_engine.cli.roles import roles
from queue_engine.cli.schedules import schedules
from queue_engine.cli.tasks import tasks_cmd
from queue_engine.cli.up import up
from queue_engine.cli.views import show_cmd, stats_cmd, top_cmd, workers_cmd
from queue_engine.cli.workflows import workflows
from queue_engine.config import validate_schema
from queue_engine.errors import ConfigError
from queue_engine.jobs import Job, JobStatus


def _check_chain(directory: Path | None, ledger: str | None) -> None:
    if (directory is None) != (ledger is None):
        raise click.UsageError("--dir and --ledger go together (a host chain needs its own ledger)")


def _echo_job(job: Job, as_json: bool) -> None:
    if as_json:
        print_json(job.to_dict())
    else:
        click.echo("\n".join(render.job_lines(job)))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@dsn_option
@schema_option
@click.version_option(package_name="queue-engine", prog_name="queue-ctl")
@click.pass_context
def ctl(ctx: click.Context, dsn: str, schema: str) -> None:
    """Operate a queue-engine database: migrations, jobs, and a local demo."""
    try:
        validate_schema(schema)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--schema") from None
    ctx.obj = CliContext(dsn=dsn, schema=schema)


@ctl.command()
@click.option(
    "--to", "target", type=click.IntRange(min=0), help="Stop at this version (default: latest)."
)
@click.option(
    "--status",
    "show_status",
    is_flag=True,
    help="Show applied and pending migrations; change nothing.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run a host application's own chain from this folder (with --ledger).",
)
@click.option(
    "--ledger", help="[schema.]table recording the host chain's applied versions (with --dir)."
)
@pass_cli
def migrate(
    cli: CliContext,
    target: int | None,
    show_status: bool,
    directory: Path | None,
    ledger: str | None,
) -> None:
    """Apply pending migrations (safe to run from several processes at once)."""
    _check_chain(directory, ledger)
    migrator = cli.migrator(directory, ledger)
    if show_status:
        for state in migrator.status():
            mark = state.applied_at.isoformat(timespec="seconds") if state.applied_at else "pending"
            changed = "" if state.checksum_matches else "  (file changed since applied)"
            click.echo(f"{state.version:04d}  {state.name:<30} {mark}{changed}")
        return
    applied = migrator.up(target)
    for m in applied:
        click.echo(f"applied {m.version:04d}_{m.name}")
    version = migrator.current_version()
    click.echo(f"database is at version {version}" + ("" if applied else " (nothing to do)"))


@ctl.command()
@click.option(
    "--to",
    "target",
    type=click.IntRange(min=0),
    required=True,
    help="Version to go down to (0 removes every table of the chain).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="A host application's chain folder (with --ledger).",
)
@click.option("--ledger", help="[schema.]table of the host chain (with --dir).")
@pass_cli
def downgrade(cli: CliContext, target: int, directory: Path | None, ledger: str | None) -> None:
    """Revert migrations down to a version."""
    _check_chain(directory, ledger)
    migrator = cli.migrator(directory, ledger)
    for m in migrator.down(target):
        click.echo(f"reverted {m.version:04d}_{m.name}")
    click.echo(f"database is at version {migrator.current_version()}")


@ctl.command()
@click.argument("task")
@click.option("--queue", "-q", help="Queue name (default: the task's, else 'default').")
@click.option(
    "--args", "raw_args", default="{}", show_default=True, help="Job arguments as a JSON object."
)
@click.option(
    "--priority", type=int, help="0-1000, lower runs first (default: the task's, else 100)."
)
@click.option("--delay", type=float, help="Seconds to wait before the job may run.")
@click.option(
    "--run-at",
    type=click.DateTime(["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d %H:%M:%S%z"]),
    help="Timezone-aware time the job may run from, e.g. 2026-01-01T09:00:00+00:00.",
)
@click.option(
    "--max-attempts", type=int, help="Attempts before the job fails (default: the task's, else 5)."
)
@click.option("--timeout", "timeout_s", type=int, help="Wall-clock budget of one attempt, seconds.")
@click.option("--lease-ttl", "lease_ttl_s", type=int, help="Lease length, seconds.")
@click.option("--lock-key", help="At most one running job per lock key, cluster-wide.")
@click.option(
    "--affinity-key",
    help="Warm state the job wants (e.g. a model name); workers warm for it prefer the job.",
)
@click.option("--idempotency-key", help="A second enqueue with this key returns the first job.")
@click.option("--dedupe-key", help="Unique among queued and running jobs.")
@click.option("--partition-key", help="Free-form partition label.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole job as JSON.")
@pass_cli
def enqueue(
    cli: CliContext,
    task: str,
    queue: str | None,
    raw_args: str,
    priority: int | None,
    delay: float | None,
    run_at: datetime | None,
    max_attempts: int | None,
    timeout_s: int | None,
    lease_ttl_s: int | None,
    lock_key: str | None,
    affinity_key: str | None,
    idempotency_key: str | None,
    dedupe_key: str | None,
    partition_key: str | None,
    as_json: bool,
) -> None:
    """Enqueue one job of TASK and print its id."""
    args = parse_json_args(raw_args)
    with cli.client() as client:
        job = client.enqueue(
            task,
            queue=queue,
            args=args,
            priority=priority,
            delay=delay,
            run_at=run_at,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            lease_ttl_s=lease_ttl_s,
            lock_key=lock_key,
            affinity_key=affinity_key,
            idempotency_key=idempotency_key,
            dedupe_key=dedupe_key,
            partition_key=partition_key,
            producer="queue-ctl",
        )
    if as_json:
        print_json(job.to_dict())
    else:
        click.echo(job.id)


@ctl.command()
@click.argument("job_id", type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@pass_cli
def status(cli: CliContext, job_id: int, as_json: bool) -> None:
    """Show one job."""
    with cli.client() as client:
        _echo_job(client.get(job_id), as_json)


@ctl.command()
@click.argument("job_id", type=click.IntRange(min=1))
@pass_cli
def cancel(cli: CliContext, job_id: int) -> None:
    """Cancel a queued job, or ask a running job to stop at its next checkpoint."""
    with cli.client() as client:
        job = client.cancel(job_id, message="canceled with queue-ctl")
    if job.status == JobStatus.CANCELED:
        click.echo(f"job {job_id} canceled")
    else:
        click.echo(f"job {job_id} is running: cancel requested, it stops at its next checkpoint")


@ctl.command()
@click.argument("job_id", type=click.IntRange(min=1))
@pass_cli
def retry(cli: CliContext, job_id: int) -> None:
    """Put a failed, canceled or lost job back in its queue."""
    with cli.client() as client:
        client.retry(job_id, message="retried with queue-ctl")
    click.echo(f"job {job_id} queued again")


def _duration_option(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """Turn ``30s``/``5m``/``2h``/``1d`` into seconds; a bad value is a usage error (exit 2)."""
    if value is None:
        return None
    from queue_engine.orchestrator.pruner import parse_duration

    try:
        return parse_duration(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


@ctl.command(name="list")
@click.option("--queue", "-q", help="Only this queue.")
@click.option(
    "--status", "status_", type=click.Choice([s.value for s in JobStatus]), help="Only this status."
)
@click.option("--task", help="Only this task.")
@click.option(
    "--older-than",
    "older_than_s",
    callback=_duration_option,
    metavar="DURATION",
    help="Only jobs created longer ago than this: seconds, or 30s, 5m, 2h, 1d, 1w.",
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the jobs as a JSON array.")
@pass_cli
def list_jobs(
    cli: CliContext,
    queue: str | None,
    status_: str | None,
    task: str | None,
    older_than_s: float | None,
    limit: int,
    as_json: bool,
) -> None:
    """List jobs, newest first."""
    with cli.client() as client:
        jobs = client.list(
            queue=queue, status=status_, task=task, limit=limit, older_than_s=older_than_s
        )
    if as_json:
        print_json([j.to_dict() for j in jobs])
        return
    click.echo("\n".join(render.job_list_lines(jobs)))


for _command in (
    *(demo, bench, up, schedules, workflows, prune, roles, tasks_cmd),
    *(stats_cmd, workers_cmd, show_cmd, top_cmd),
    *(pause_cmd, resume_cmd, scale_cmd, rate_cmd, park_cmd, unpark_cmd, stop_cmd, controls_cmd),
):
    ctl.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``queue-ctl`` console script."""
    run_cli(ctl, "queue-ctl", argv)
