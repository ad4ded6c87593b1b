"""``queue-ctl`` commands on jobs: enqueue, status, cancel, retry, list.

Each opens one connection through the group's
:class:`~queue_engine.cli.context.CliContext`, calls the
:class:`~queue_engine.Client` method of the same name, and prints the job (or
its id) with :mod:`queue_engine.cli.render`.
"""

from __future__ import annotations

from datetime import datetime

import click

from queue_engine.cli import render
from queue_engine.cli.common import Duration, parse_json_args
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json
from queue_engine.foundation.settings import DURATION_FORMS
from queue_engine.producer.jobs import Job, JobStatus


def _echo_job(job: Job, as_json: bool) -> None:
    if as_json:
        print_json(job.to_dict())
    else:
        click.echo("\n".join(render.job_lines(job)))


@click.command()
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
    "--concurrency-key",
    help="At most --concurrency-limit (or the operator's `limits set`) running jobs per key.",
)
@click.option(
    "--concurrency-limit", type=int, help="1-10000: the key's limit as this job states it."
)
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
    concurrency_key: str | None,
    concurrency_limit: int | None,
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
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
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


@click.command()
@click.argument("job_id", type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@pass_cli
def status(cli: CliContext, job_id: int, as_json: bool) -> None:
    """Show one job."""
    with cli.client() as client:
        _echo_job(client.get(job_id), as_json)


@click.command()
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


@click.command()
@click.argument("job_id", type=click.IntRange(min=1))
@pass_cli
def retry(cli: CliContext, job_id: int) -> None:
    """Put a failed, canceled or lost job back in its queue."""
    with cli.client() as client:
        client.retry(job_id, message="retried with queue-ctl")
    click.echo(f"job {job_id} queued again")


@click.command(name="list")
@click.option("--queue", "-q", help="Only this queue.")
@click.option(
    "--status", "status_", type=click.Choice([s.value for s in JobStatus]), help="Only this status."
)
@click.option("--task", help="Only this task.")
@click.option(
    "--older-than",
    "older_than_s",
    type=Duration(),
    help=f"Only jobs created longer ago than this: {DURATION_FORMS}.",
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
