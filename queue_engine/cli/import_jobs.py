"""``queue-ctl import``: move a replaced system's unfinished jobs and workflows here.

The work is in :mod:`queue_engine.operator.importing`; this module reads the
options and prints the report. The source DSN is a secret like any DSN: the
report names its host and database only (``describe_dsn``), and a bad one is
refused in one line without echoing it.
"""

from __future__ import annotations

import click

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json
from queue_engine.operator.importing.run import BATCH_SIZE_DEFAULT, SOURCES, run_import


@click.command(name="import")
@click.option(
    "--from",
    "source",
    type=click.Choice(SOURCES),
    required=True,
    help="The system the jobs come from.",
)
@click.option(
    "--source-dsn",
    required=True,
    help="Its database (libpq string or URI; keep the password in ~/.pgpass). Only read.",
)
@click.option(
    "--source-schema",
    default="public",
    show_default=True,
    help="The schema of its tables (dataloader: PG_SCHEMA_QUEUE).",
)
@click.option(
    "--dry-run", is_flag=True, help="Count what would move, per kind and status; write nothing."
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=BATCH_SIZE_DEFAULT,
    show_default=True,
    help="Rows read per SELECT and written per transaction.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@pass_cli
def import_cmd(
    cli: CliContext,
    source: str,
    source_dsn: str,
    source_schema: str,
    dry_run: bool,
    batch_size: int,
    as_json: bool,
) -> None:
    """Move the unfinished jobs and workflows of dataloader, pqrun or queue_workflows here."""
    with cli.connect() as conn:
        report = run_import(
            conn,
            cli.schema,
            source,
            source_dsn,
            source_schema=source_schema,
            dry_run=dry_run,
            batch_size=batch_size,
        )
    if as_json:
        print_json(report.to_dict())
        return
    for line in report.lines():
        click.echo(line)
