"""``queue-ctl roles``: print (or apply) the least-privilege role template.

Printing is the default so an operator can review the grants and run them
through their own tooling; ``--apply`` runs them on the configured database
as the connected role (the schema owner).
"""

from __future__ import annotations

import click

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.operator.roles import MONITOR_ROLE, PRODUCER_ROLE, WORKER_ROLE, roles_sql


@click.command(name="roles")
@click.option("--worker-role", default=WORKER_ROLE, show_default=True)
@click.option("--producer-role", default=PRODUCER_ROLE, show_default=True)
@click.option("--monitor-role", default=MONITOR_ROLE, show_default=True)
@click.option("--apply", "apply_", is_flag=True, help="Run the SQL instead of printing it.")
@pass_cli
def roles(
    cli: CliContext, worker_role: str, producer_role: str, monitor_role: str, apply_: bool
) -> None:
    """Print the SQL creating worker/producer/monitor group roles and their grants."""
    text = roles_sql(cli.schema, worker=worker_role, producer=producer_role, monitor=monitor_role)
    if not apply_:
        click.echo(text, nl=False)
        return
    with cli.connect() as conn:
        conn.execute(text.encode())
    click.echo(f"roles {worker_role}, {producer_role}, {monitor_role} created or updated")
