"""``queue-ctl prune``: run retention once, or see what it would delete.

The same code the orchestrator leader runs every minute
(:mod:`queue_engine.orchestrator.pruner`), in bounded batches; from the
command line it keeps taking runs until nothing expired is left (or
``--max-batches`` statements have run), so an operator can clear a backlog at
once, e.g. after lowering a retention.
"""

from __future__ import annotations

import click

from queue_engine.cli.common import Duration
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json, prune_summary
from queue_engine.foundation.settings import DURATION_FORMS
from queue_engine.orchestrator.pruner import (
    BATCH_SIZE_DEFAULT,
    Retention,
    prune_dry_run,
    prune_once,
)


def _retention(seconds: float | None) -> Retention:
    base = Retention.from_env()
    if seconds is None:
        return base
    if seconds <= 0:
        raise click.BadParameter("must be more than 0", param_hint="--older-than")
    return Retention.uniform(seconds, workers_s=base.workers_s)


@click.command(name="prune")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option(
    "--older-than",
    "older_than_s",
    type=Duration(),
    help=f"One retention for every final status, instead of QUEUE_ENGINE_RETAIN_<STATUS>_S: "
    f"{DURATION_FORMS}.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 100_000),
    default=BATCH_SIZE_DEFAULT,
    show_default=True,
    help="Jobs deleted per statement (one short transaction each).",
)
@click.option(
    "--max-batches",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Stop after this many statements.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@pass_cli
def prune(
    cli: CliContext,
    dry_run: bool,
    older_than_s: float | None,
    batch_size: int,
    max_batches: int,
    as_json: bool,
) -> None:
    """Delete finished jobs and whole finished workflows past retention, and stale worker rows."""
    retention = _retention(older_than_s)
    schema = cli.schema
    with cli.connect() as conn:
        if dry_run:
            result = prune_dry_run(conn, schema, retention)
        else:
            result = prune_once(
                conn, schema, retention, batch_size=batch_size, max_batches=max_batches
            )
    if as_json:
        print_json(result.to_dict())
        return
    click.echo(prune_summary(result))
