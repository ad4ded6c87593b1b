"""``queue-ctl limits``: set, list and clear per-key concurrency limits and rates at runtime.

A key's limit here overrides the ``concurrency_limit`` its jobs carry
(:mod:`queue_engine.operator.limits`, migration 0031); a key's rate (a token
bucket, migration 0033) makes its jobs start at most that fast. The claim statement
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
from queue_engine.foundation.errors import ValidationError
from queue_engine.operator.flow import KeyFlow
from queue_engine.operator.limits import (
    check_key,
    clear_limit,
    clear_rate,
    list_limits,
    parse_burst,
    parse_key_rate,
    parse_limit,
    set_limit,
    set_rate,
)


@click.group(name="limits")
def limits() -> None:
    """Per-key limits: at most N jobs of a key running, at most R starting a second."""


#: ``limits set k -1`` must reach the validation (one clear line) instead of
#: failing as "no such option: -1", as ``scale`` and ``rate``.
@limits.command(name="set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("n", metavar="[N]", required=False)
@click.option(
    "--rate",
    "rate",
    metavar="R/s|R/min",
    help="Jobs of KEY start at most R a second (or a minute) on average, fleet-wide.",
)
@click.option(
    "--burst",
    "burst",
    metavar="B",
    help="At most B jobs' tokens saved up (default: one second's worth, at least 1).",
)
@pass_cli
def set_cmd(cli: CliContext, key: str, n: str | None, rate: str | None, burst: str | None) -> None:
    """At most N jobs of KEY run at once (0: none starts); with --rate, start at most R a second.

    N overrides the jobs' own concurrency_limit. --rate gives KEY a token
    bucket: each job takes its weight in tokens when it is claimed, and a job
    whose tokens are not due yet waits queued.
    """
    check_key(key)
    # Before connecting: a typo fails the same way with any DSN.
    if n is None and rate is None:
        raise ValidationError("give a limit N, a --rate, or both (see queue-ctl limits set --help)")
    if n is not None:
        parse_limit(n)
    if burst is not None and rate is None:
        raise ValidationError("--burst needs --rate (the bucket it sizes)")
    value = None if rate is None else parse_key_rate(rate)
    size = None if burst is None else parse_burst(burst)
    # One transaction for both: a limit and a rate given together are set together.
    with cli.connect() as conn, conn.transaction():
        if n is not None:
            result = set_limit(conn, cli.schema, key, n, by=cli.actor)
            was = "none" if result.previous is None else str(result.previous)
            held = "; none of its jobs starts" if result.max_running == 0 else ""
            click.echo(
                f"key {key} limited to {result.max_running} running (was: {was}; running now: "
                f"{result.running}){held}"
            )
        if value is not None:
            rated = set_rate(conn, cli.schema, key, value, size, by=cli.actor)
            was = (
                "none"
                if rated.previous_rate is None
                else f"{_rate(rated.previous_rate)}, burst {rated.previous_burst}"
            )
            click.echo(f"key {key} rated {_rate(rated.rate)}, burst {rated.burst} (was: {was})")


def _rate(per_s: float) -> str:
    """A rate as an operator wrote it: per second, or per minute when under one a second."""
    if per_s < 1:
        return f"{per_s * 60:g}/min"
    return f"{per_s:g}/s"


def _tokens(row: KeyFlow) -> str:
    return "-" if row.tokens is None else f"{row.tokens:.1f}"


@limits.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the limits as JSON.")
@pass_cli
def list_cmd(cli: CliContext, as_json: bool) -> None:
    """Every limit and rate operators set, with each key's running jobs and tokens now."""
    with cli.connect() as conn:
        rows = list_limits(conn, cli.schema)
    if as_json:
        print_json([r.to_dict() for r in rows])
        return
    if not rows:
        click.echo("no limits or rates set (jobs follow their own concurrency_limit)")
        return
    lines = table(
        ["KEY", "LIMIT", "RUNNING", "WAITING", "RATE", "BURST", "TOKENS", "SET AT"],
        [
            [
                r.key,
                "-" if r.max_running is None else str(r.max_running),
                str(r.running),
                waiting_text(r),
                "-" if r.rate is None else _rate(r.rate),
                "-" if r.burst is None else str(r.burst),
                _tokens(r),
                "" if r.set_at is None else r.set_at.isoformat(timespec="seconds"),
            ]
            for r in rows
        ],
        right={1, 2, 3, 4, 5, 6},
    )
    click.echo("\n".join(lines))


@limits.command(name="clear")
@click.argument("key")
@click.option("--rate-only", is_flag=True, help="Clear KEY's rate and keep its limit.")
@pass_cli
def clear_cmd(cli: CliContext, key: str, rate_only: bool) -> None:
    """Remove KEY's limit and rate: its jobs follow their own concurrency_limit again."""
    check_key(key)
    with cli.connect() as conn:
        removed = None if rate_only else clear_limit(conn, cli.schema, key, by=cli.actor)
        rate = clear_rate(conn, cli.schema, key, by=cli.actor)
    if not rate_only:
        if removed is None:
            click.echo(f"key {key} had no limit set (unchanged)")
        else:
            click.echo(f"key {key} limit {removed} removed: its jobs follow their own limit")
    if rate is not None:
        click.echo(f"key {key} rate {_rate(rate[0])}, burst {rate[1]} removed")
    elif rate_only:
        click.echo(f"key {key} had no rate set (unchanged)")
