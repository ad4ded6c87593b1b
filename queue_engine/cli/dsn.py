"""``queue-ctl dsn``: print the database address the other commands use.

With ``--dsn`` or ``QUEUE_ENGINE_DSN`` it prints that; with neither, the
running local fleet's (``queue-ctl up``; :mod:`queue_engine.foundation.localfleet`), so
that a second shell can hand it to programs that only read the variable
(``export QUEUE_ENGINE_DSN="$(queue-ctl dsn)"``, ``psql "$(queue-ctl dsn)"``).
"""

from __future__ import annotations

import click

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.foundation import localfleet
from queue_engine.foundation.errors import ConfigError


@click.command("dsn")
@pass_cli
def dsn_cmd(cli: CliContext) -> None:
    """Print the DSN in use: --dsn, QUEUE_ENGINE_DSN, or the local fleet's (queue-ctl up)."""
    if cli.dsn:
        click.echo(cli.dsn)
        return
    if localfleet.names_a_server():
        raise ConfigError(
            "no DSN configured: libpq's PG* variables choose the server (set QUEUE_ENGINE_DSN "
            "to name it in one string)"
        )
    raise ConfigError(
        "no DSN configured and no local fleet running: start one with `queue-ctl up`, "
        "or set QUEUE_ENGINE_DSN"
    )
