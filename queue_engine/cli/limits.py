"""``queue-ctl limits``: set, list and clear per-key concurrency limits at runtime.

A key's limit here overrides the ``concurrency_limit`` its jobs carry
(:mod:`queue_engine.operator.limits`, migration 0031). The claim statement
reads it on every claim, so a change holds fleet-wide from the next claim on,
with no restart and no re-enqueue; running jobs go on. Errors are one line
with the exit codes of :mod:`queue_engine.cli.common` (2 for a bad key or
limit, checked before connecting; 3 for a schema older than version 31).
"""

from __future__ import annotations

import click

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.flow_render import waiting_text
from queue_engine.cli.render import print_json, table
from queue_engine.operator.limits import check_key, clear_limit, list_limits, parse_limit, set_limit


@click.group(name="limits")
def limits() -> None:
    """Per-key concurrency limits: at most N jobs of a key running, fleet-wide."""


#: ``limits set k -1`` must reach the validation (one clear line) instead of
#: failing as "no such option: -1", as ``scale`` and ``rate``.
@limits.command(name="set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("n", metavar="N")
@pass_cli
def set_cmd(cli: CliContext, key: str, n: str) -> None:
    """At most N jobs of KEY run at once (0: none starts), over the jobs' own limit."""
    check_key(key)
    parse_limit(n)  # before connecting: a typo fails the same way with any DSN
    with cli.connect() as conn:
        result = set_limit(conn, cli.schema, key, n, by=cli.actor)
    was = "none" if result.previous is None else str(result.previous)
    held = "; none of its jobs starts" if result.max_running == 0 else ""
    click.echo(
        f"key {key} limited to {result.max_running} running (was: {was}; running now: "
        f"{result.running}){held}"
    )


@limits.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the limits as JSON.")
@pass_cli
def list_cmd(cli: CliContext, as_json: bool) -> None:
    """Every limit operators set, with each key's running and waiting jobs now."""
    with cli.connect() as conn:
        rows = list_limits(conn, cli.schema)
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    if not rows:
        click.echo("no concurrency limits set (jobs follow their own concurrency_limit)")
        return
    lines = table(
        ["KEY", "LIMIT", "RUNNING", "WAITING", "SET AT"],
        [
            [
                r.key,
                str(r.max_running),
                str(r.running),
                waiting_text(r),
                "" if r.set_at is None else r.set_at.isoformat(timespec="seconds"),
            ]
            for r in rows
        ],
        right={1, 2, 3},
    )
    click.echo("\n".join(lines))


@limits.command(name="clear")
@click.argument("key")
@pass_cli
def clear_cmd(cli: CliContext, key: str) -> None:
    """Remove KEY's limit: its jobs follow their own concurrency_limit again."""
    check_key(key)
    with cli.connect() as conn:
        removed = clear_limit(conn, cli.schema, key, by=cli.actor)
    if removed is None:
        click.echo(f"key {key} had no limit set (unchanged)")
    else:
        click.echo(f"key {key} limit {removed} removed: its jobs follow their own limit")
