"""``queue-ctl tasks``: the tasks' defaults as the database knows them, and who published them.

Workers publish their task registry when they start; every enqueue path
(this CLI, the HTTP API, SQL, any producer) fills the options its caller left
unset from what was published (:mod:`queue_engine.producer.task_publications`). This
command shows what is known: per task the defaults in effect (the newest
publication), then every other publication still on record, and a warning
line for a task whose live workers disagree.
"""

from __future__ import annotations

from typing import Any

import click

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json, table
from queue_engine.foundation import settings
from queue_engine.operator.stats import format_duration
from queue_engine.producer import task_publications
from queue_engine.producer.task_publications import Publication, PublishedTask
from queue_engine.producer.validation import DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, DEFAULT_QUEUE

HEADER = ["TASK", "QUEUE", "PRI", "TRIES", "TIMEOUT", "LEASE", "PUBLISHED", "BY", "STATE", "RETRY"]


@click.command(name="tasks")
@click.argument("task", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the tasks as a JSON array.")
@pass_cli
def tasks_cmd(cli: CliContext, task: str | None, as_json: bool) -> None:
    """Tasks whose defaults workers published: the defaults, from which workers, when.

    An enqueue from anywhere (this CLI, the HTTP API, SQL) takes these for the
    options it leaves unset. With TASK, only that task.
    """
    with cli.connect() as conn:
        known = task_publications.read(
            conn, cli.schema, dead_after_s=settings.dead_after_s(), task=task
        )
    if as_json:
        print_json([t.to_dict() for t in known])
    elif known:
        click.echo("\n".join(lines(known)))
    elif task:
        click.echo(
            f"task {task!r}: no worker has published it (workers publish their tasks when they "
            f"start); its jobs get the built-in defaults: queue {DEFAULT_QUEUE!r}, priority "
            f"{DEFAULT_PRIORITY}, {DEFAULT_MAX_ATTEMPTS} attempts, the worker's timeout and lease"
        )
    else:
        click.echo("no task published yet: workers publish their tasks' defaults when they start")


def lines(known: list[PublishedTask]) -> list[str]:
    """The table (the defaults in effect, then each other publication), then the conflicts."""
    body: list[list[str]] = []
    for t in known:
        body.append(_row(t.task, t.effective))
        body.extend(_row("", p) for p in t.publications if p.worker_id != t.effective.worker_id)
    out = table(HEADER, body, right={2, 3})
    for t in known:
        for name, values in t.conflicts.items():
            shown = ", ".join(_value(v) for v in values)
            out.append(
                f"! {t.task}: live workers disagree on {name} ({shown}); "
                f"{_value(values[0])} is in effect (the newest publication)"
            )
    return out


def _row(task: str, p: Publication) -> list[str]:
    d = p.defaults
    return [
        task,
        d.queue,
        str(d.priority),
        str(d.max_attempts),
        seconds(d.timeout_s),
        seconds(d.lease_ttl_s),
        format_duration(p.age_s) + " ago",
        f"{p.host}:{p.pid}",
        p.liveness,
        retry_text(d.retry),
    ]


def _value(value: Any) -> str:
    return "none" if value is None else str(value)


def seconds(value: int | None) -> str:
    """Whole seconds, short: ``45s``, ``5m``, ``1h30m``, ``2d``; ``-`` for none (the worker's)."""
    if value is None:
        return "-"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, value = divmod(value, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def retry_text(data: dict[str, Any] | None) -> str:
    """A published retry policy (``retry.policy_data``), short."""
    if not data:
        return "-"
    if data.get("kind") == "exponential":
        return (
            f"exp {_span(data['base_s'])} x{data['factor']:g} max {_span(data['max_s'])} "
            f"jitter {data['jitter'] * 100:g}%"
        )
    if data.get("kind") == "fixed":
        return f"fixed {_span(data['seconds'])}"
    jitter = f" jitter {data.get('jitter', 0) * 100:g}%" if data.get("jitter") else ""
    if data.get("kind") == "stepped":
        return "steps " + ",".join(_span(step) for step in data["steps_s"]) + jitter
    if data.get("kind") == "linear":
        cap = f" max {_span(data['max_s'])}" if data.get("max_s") is not None else ""
        return f"linear {_span(data['step_s'])} x attempt{cap}{jitter}"
    return str(data.get("class", data.get("kind", "?")))


def _span(value: float) -> str:
    return seconds(int(value)) if float(value).is_integer() and value > 0 else f"{value:g}s"
