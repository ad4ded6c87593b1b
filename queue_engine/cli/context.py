"""What every ``queue-ctl`` subcommand gets from the group: where the engine lives.

The ``queue-ctl`` group validates ``--dsn`` and ``--schema`` once and stores a
:class:`CliContext` as click's context object; a subcommand asks for it with
``@pass_cli`` (click finds it by type, so nested groups such as ``schedules``
need no ``find_root()``). Each command opens what it needs through it, one
autocommit connection for the life of the command, so connection handling is
written once rather than in every command.

Every subcommand module imports this one, so it imports only click: the
client, the driver and the migrator are loaded by the method that needs them
(``queue-ctl --help`` and the embedded-server commands never do).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from queue_engine.foundation import localfleet
from queue_engine.foundation.config import DEFAULT_SCHEMA

if TYPE_CHECKING:
    import psycopg

    from queue_engine.foundation.migrate import Migrator
    from queue_engine.operator.audit import Actor
    from queue_engine.producer.client import Client


@dataclass(frozen=True)
class CliContext:
    """The database and schema one ``queue-ctl`` invocation works on.

    ``given_dsn`` and ``given_schema`` are what the user set (``--dsn`` or
    ``QUEUE_ENGINE_DSN``; ``--schema`` or ``QUEUE_ENGINE_SCHEMA``). With no
    DSN, :attr:`dsn` is the running local fleet's (``queue-ctl up``; see
    :mod:`queue_engine.foundation.localfleet`), and :attr:`schema` its schema unless one
    was given; the first use says so on stderr, once. ``up``, ``demo`` and
    ``bench`` read ``given_dsn`` instead: each decides for itself what a
    running fleet means to it.
    """

    #: libpq connection string or URI the user gave; empty: none.
    given_dsn: str
    #: The (validated) schema the user gave; None: the default.
    given_schema: str | None = None

    @cached_property
    def _target(self) -> tuple[str, str]:
        dsn, fleet = localfleet.resolve(self.given_dsn)
        schema = self.given_schema or (fleet.schema if fleet else DEFAULT_SCHEMA)
        if fleet is not None:
            click.echo(f"queue-ctl: no DSN configured: using {fleet.describe()}", err=True)
        return dsn, schema

    @property
    def dsn(self) -> str:
        """The DSN to connect with; empty: libpq's defaults and ``PG*`` variables."""
        return self._target[0]

    @property
    def schema(self) -> str:
        """The schema holding the engine's tables."""
        return self._target[1]

    @property
    def actor(self) -> Actor:
        """Who the audit of controls names for this command: ``QUEUE_ENGINE_ACTOR``, else user@host."""
        from queue_engine.operator.audit import local_actor

        return local_actor("cli")

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection[Any]]:
        """One autocommit connection, closed on exit; unreachable: DatabaseUnavailable (69)."""
        from queue_engine.foundation.db import connect

        with connect(self.dsn) as conn:
            yield conn

    @contextmanager
    def client(self) -> Iterator[Client]:
        """A :class:`Client` on one autocommit connection, closed on exit."""
        from queue_engine.producer.client import Client

        with self.connect() as conn:
            yield Client(conn=conn, schema=self.schema)

    def migrator(self, directory: Path | None = None, ledger: str | None = None) -> Migrator:
        """The engine's chain, or a host application's (``--dir`` with ``--ledger``)."""
        from queue_engine.foundation.migrate import Migrator

        return Migrator(self.dsn, schema=self.schema, directory=directory, ledger=ledger)


#: Decorator handing a command the :class:`CliContext` of its ``queue-ctl`` group.
pass_cli = click.make_pass_decorator(CliContext)
