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

from queue_engine.cli.common import parse_json_args, print_json
from queue_engine.db import connect, schema_errors
from queue_engine.scheduler import store
from queue_engine.scheduler.schedules import OVERLAP_POLICIES, ScheduleSpec


@contextmanager
def _open(ctx: click.Context) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    settings = ctx.find_root().obj
    schema = settings["schema"]
    with connect(settings["dsn"]) as conn, schema_errors(schema):
        yield conn, schema


def _when(value: datetime | None, tz: Any) -> str:
    return "-" if value is None else value.astimezone(tz).isoformat(timespec="seconds")


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
@click.pass_context
def add(
    ctx: click.Context,
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
    with _open(ctx) as (conn, schema):
        created = store.add(conn, schema, spec, replace=replace)
    nxt = spec.trigger.next_after(datetime.now(UTC))
    verb = "added" if created else "replaced"
    when = "disabled" if disabled else f"next slot {_when(nxt, spec.trigger.zone)}"
    click.echo(f"schedule {name} {verb}: {when}")


@schedules.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the schedules as a JSON array.")
@click.pass_context
def list_schedules(ctx: click.Context, as_json: bool) -> None:
    """List every schedule with its last slot and next fire time."""
    now = datetime.now(UTC)
    with _open(ctx) as (conn, schema):
        rows, broken = store.list_rows(conn, schema)
    for line in broken:
        click.echo(f"queue-ctl: warning: {line}", err=True)
    if as_json:
        print_json([store.describe(row, now) for row in rows])
        return
    header = (
        f"{'NAME':<24} {'EXPRESSION':<18} {'TZ':<16} {'TASK':<20} {'QUEUE':<12} "
        f"{'ENABLED':<7} {'SOURCE':<6} {'LAST SLOT':<25} NEXT FIRE"
    )
    click.echo(header)
    for row in rows:
        spec = row.spec
        zone = spec.trigger.zone
        click.echo(
            f"{spec.name:<24} {spec.expression:<18} {spec.tz:<16} {spec.task:<20} "
            f"{spec.queue:<12} {'yes' if spec.enabled else 'no':<7} {spec.source:<6} "
            f"{_when(row.last_slot, zone):<25} {_when(row.next_fire(now), zone)}"
        )


@schedules.command()
@click.argument("name")
@click.pass_context
def enable(ctx: click.Context, name: str) -> None:
    """Enable a schedule (slots that passed while it was disabled are not caught up)."""
    with _open(ctx) as (conn, schema):
        store.set_enabled(conn, schema, name, True)
    click.echo(f"schedule {name} enabled")


@schedules.command()
@click.argument("name")
@click.pass_context
def disable(ctx: click.Context, name: str) -> None:
    """Disable a schedule (kept across scheduler restarts, also for code schedules)."""
    with _open(ctx) as (conn, schema):
        store.set_enabled(conn, schema, name, False)
    click.echo(f"schedule {name} disabled")


@schedules.command()
@click.argument("name")
@click.pass_context
def remove(ctx: click.Context, name: str) -> None:
    """Remove a schedule and its slot records."""
    with _open(ctx) as (conn, schema):
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
@click.pass_context
def run_now(ctx: click.Context, name: str) -> None:
    """Enqueue one job of NAME at once (reason "manual"; no slot, no dedupe) and print its id."""
    with _open(ctx) as (conn, schema):
        job_id = store.run_now(conn, schema, name)
    click.echo(job_id)
