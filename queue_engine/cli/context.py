"""What every ``queue-ctl`` subcommand gets from the group: where the engine lives.

The ``queue-ctl`` group validates ``--dsn`` and ``--schema`` once and stores a
:class:`CliContext` as click's context object; a subcommand asks for it with
``@pass_cli`` (click finds it by type, so nested groups such as ``schedules``
need no ``find_root()``). Each command opens what it needs through it, one
autocommit connection for the life of the command, so connection handling is
written once rather than in every command.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import psycopg

from queue_engine.client import Client
from queue_engine.db import connect
from queue_engine.migrate import Migrator


@dataclass(frozen=True)
class CliContext:
    """The database and schema one ``queue-ctl`` invocation works on."""

    #: libpq connection string or URI; empty: the libpq ``PG*`` variables.
    dsn: str
    #: The (validated) schema holding the engine's tables.
    schema: str

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection[Any]]:
        """One autocommit connection, closed on exit; unreachable: DatabaseUnavailable (69)."""
        with connect(self.dsn) as conn:
            yield conn

    @contextmanager
    def client(self) -> Iterator[Client]:
        """A :class:`Client` on one autocommit connection, closed on exit."""
        with self.connect() as conn:
            yield Client(conn=conn, schema=self.schema)

    def migrator(self, directory: Path | None = None, ledger: str | None = None) -> Migrator:
        """The engine's chain, or a host application's (``--dir`` with ``--ledger``)."""
        return Migrator(self.dsn, schema=self.schema, directory=directory, ledger=ledger)


#: Decorator handing a command the :class:`CliContext` of its ``queue-ctl`` group.
pass_cli = click.make_pass_decorator(CliContext)
