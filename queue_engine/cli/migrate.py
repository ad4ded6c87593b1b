"""``queue-ctl migrate`` and ``queue-ctl downgrade``: move a database along a migration chain.

The engine's own chain by default, or a host application's (``--dir`` with
``--ledger``); the work is :class:`queue_engine.foundation.migrate.Migrator`'s, loaded
through :class:`~queue_engine.cli.context.CliContext` when the command runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from queue_engine.cli.context import CliContext, pass_cli


def _check_chain(directory: Path | None, ledger: str | None) -> None:
    if (directory is None) != (ledger is None):
        raise click.UsageError("--dir and --ledger go together (a host chain needs its own ledger)")


@click.command()
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


@click.command()
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
