"""``queue-ctl schedules``: add, list, enable, disable, remove and run-now periodic schedules.

Every change is one transaction that also NOTIFYs ``<schema>.schedules``, so a
running ``queue-scheduler`` picks it up within a second. Errors are one line
with the exit codes of :mod:`queue_engine.cli.common` (2 for bad input).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import click
import psycopg

from queue_engine.cli.common import parse_json_args
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json, schedule_lines, when
from queue_engine.foundation.db import schema_errors
from queue_engine.producer.schedules import OVERLAP_POLICIES, ScheduleSpec
from queue_engine.scheduler import store


@contextmanager
def _open(cli: CliContext) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """A connection on which a missing schema reads "run queue-ctl migrate" (exit 3)."""
    with cli.connect() as conn, schema_errors(cli.schema):
        yield conn, cli.schema


@click.group(name="schedules")
def schedules() -> None:
    """Manage periodic schedules (run by queue-scheduler)."""


@schedules.command()
@click.argument("name")
@click.argument("expression")
@click.option("--task", required=True, help="Task to enqueue at every slot.")
@click.option("--queue", "-q", default="default", show_default=True, help="Queue of the jobs.")
@click.option(
    "--args", "raw_args", default="{}", show_default=True, help="Job arguments as a JSON object."
)
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of the expression.")
@click.option(
    "--catchup",
    type=int,
    default=0,
    show_default=True,
    help="Missed slots to enqueue after downtime (0: skip them).",
)
@click.option(
    "--overlap",
    type=click.Choice(OVERLAP_POLICIES),
    default="allow",
    show_default=True,
    help="skip: skip a slot while the previous job is still queued or running.",
)
@click.option("--priority", type=int, default=100, show_default=True)
@click.option("--max-attempts", type=int, help="Attempts of each job (default 5).")
@click.option("--timeout", "timeout_s", type=int, help="Wall-clock budget of one attempt, s.")
@click.option("--disabled", is_flag=True, help="Add it disabled.")
@click.option("--replace", is_flag=True, help="Replace a CLI schedule of the same name.")
@pass_cli
def add(
    cli: CliContext,
    name: str,
    expression: str,
    task: str,
    queue: str,
    raw_args: str,
    tz: str,
    catchup: int,
    overlap: str,
    priority: int,
    max_attempts: int | None,
    timeout_s: int | None,
    disabled: bool,
    replace: bool,
) -> None:
    """Add schedule NAME firing at EXPRESSION ('*/5 * * * *', '0 */10 * * * *', 'every 30s')."""
    spec = ScheduleSpec(
        name=name,
        expression=expression,
        task=task,
        tz=tz,
        queue=queue,
        args=parse_json_args(raw_args),
        priority=priority,
        max_attempts=max_attempts,
        timeout_s=timeout_s,
        catchup=catchup,
        overlap=overlap,
        enabled=not disabled,
        source="cli",
    )
    with _open(cli) as (conn, schema):
        created = store.add(conn, schema, spec, replace=replace)
    nxt = spec.trigger.next_after(datetime.now(UTC))
    verb = "added" if created else "replaced"
    state = "disabled" if disabled else f"next slot {when(nxt, spec.trigger.zone)}"
    click.echo(f"schedule {name} {verb}: {state}")


@schedules.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the schedules as a JSON array.")
@pass_cli
def list_schedules(cli: CliContext, as_json: bool) -> None:
    """List every schedule with its last slot and next fire time."""
    now = datetime.now(UTC)
    with _open(cli) as (conn, schema):
        rows, broken = store.list_rows(conn, schema)
    for line in broken:
        click.echo(f"queue-ctl: warning: {line}", err=True)
    if as_json:
        print_json([store.describe(row, now) for row in rows])
        return
    click.echo("\n".join(schedule_lines(rows, now)))


@schedules.command()
@click.argument("name")
@pass_cli
def enable(cli: CliContext, name: str) -> None:
    """Enable a schedule (slots that passed while it was disabled are not caught up)."""
    with _open(cli) as (conn, schema):
        store.set_enabled(conn, schema, name, True)
    click.echo(f"schedule {name} enabled")


@schedules.command()
@click.argument("name")
@pass_cli
def disable(cli: CliContext, name: str) -> None:
    """Disable a schedule (kept across scheduler restarts, also for code schedules)."""
    with _open(cli) as (conn, schema):
        store.set_enabled(conn, schema, name, False)
    click.echo(f"schedule {name} disabled")


@schedules.command()
@click.argument("name")
@pass_cli
def remove(cli: CliContext, name: str) -> None:
    """Remove a schedule and its slot records."""
    with _open(cli) as (conn, schema):
        source = store.remove(conn, schema, name)
    note = (
        " (declared in code: the next `queue-scheduler --app` start adds it back; "
        "use `disable` to stop it for good)"
        if source == "code"
        else ""
    )
    click.echo(f"schedule {name} removed{note}")


@schedules.command(name="run-now")
@click.argument("name")
@pass_cli
def run_now(cli: CliContext, name: str) -> None:
    """Enqueue one job of NAME at once (reason "manual"; no slot, no dedupe) and print its id."""
    with _open(cli) as (conn, schema):
        job_id = store.run_now(conn, schema, name)
    click.echo(job_id)
