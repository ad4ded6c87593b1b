"""``queue-ctl audit``: who changed which control, when, from what to what.

Reads the audit of controls (:mod:`queue_engine.operator.audit`, migration
0034), newest first. Filters are checked before connecting (exit 2, one
line); a schema older than version 34 gives exit 3.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json, table
from queue_engine.operator.audit import (
    DEFAULT_ROWS,
    check_filters,
    list_control_events,
    parse_since,
)


def _state(value: Any) -> str:
    """A before/after as ``k=v k=v`` (``-``: nothing set)."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return " ".join(f"{k}={json.dumps(v)}" for k, v in value.items()) or "-"
    return json.dumps(value)


@click.command(name="audit")
@click.option("--since", help="Only changes since a duration ago (90m, 2d) or a time (ISO 8601).")
@click.option("--control", help="Only this control (pause, scale, limit_set, ...).")
@click.option("--target", help="Only changes to this queue, key, worker id or host.")
@click.option(
    "--limit", type=int, default=DEFAULT_ROWS, show_default=True, help="At most this many rows."
)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@pass_cli
def audit(
    cli: CliContext,
    since: str | None,
    control: str | None,
    target: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Who changed which control (pause, scale, rate, park, stop, limits), newest first."""
    # Before connecting: a typo fails the same way with any DSN.
    since_at = None if since is None else parse_since(since, datetime.now(UTC))
    check_filters(control, target, limit)
    with cli.connect() as conn:
        rows = list_control_events(
            conn, cli.schema, since=since_at, control=control, target=target, limit=limit
        )
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    if not rows:
        click.echo(
            "no control changes recorded"
            + (" matching these filters" if (since or control or target) else "")
        )
        return
    lines = table(
        ["AT", "CONTROL", "TARGET", "BEFORE", "AFTER", "ACTOR", "VIA"],
        [
            [
                r.at.isoformat(timespec="seconds"),
                r.control,
                r.target,
                _state(r.before),
                _state(r.after),
                r.actor,
                r.via,
            ]
            for r in rows
        ],
    )
    click.echo("\n".join(lines))
