"""A click group that imports a subcommand's module only when that subcommand runs.

``queue-ctl`` has some thirty subcommands in a dozen modules, and between them
they import nearly the whole engine (the orchestrator's sweeps for ``prune``,
the fleet supervisor for ``up``, the workflow renderer, the embedded server).
Importing them all on every call cost ``queue-ctl status 1`` most of its
second. This group knows each subcommand by name and ``module:attribute`` (the
pattern of click's "lazily loading subcommands" documentation) and loads one
module per call.

``queue-ctl --help`` lists every subcommand with its short help without
loading any: the short help is kept here as data (:class:`LazyCommand`), and
``tests/unit/test_cli_lazy.py`` holds it to each command's real help, so the
listing cannot drift from the commands.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import click

#: Click's "no such command" error with close-name suggestions (click >= 8.4).
_NO_SUCH_COMMAND: Callable[..., click.UsageError] | None = getattr(
    click.exceptions, "NoSuchCommand", None
)


@dataclass(frozen=True)
class LazyCommand:
    """Where a subcommand lives, and the short help ``--help`` shows for it."""

    #: ``package.module:attribute`` (entry-point syntax): imported when the subcommand runs.
    target: str
    #: The command's short help: the first sentence of its docstring.
    short_help: str

    def load(self) -> click.Command:
        """Import the module and return the command."""
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command


class LazyGroup(click.Group):
    """A group whose subcommands are :class:`LazyCommand` entries, loaded on use."""

    def __init__(self, *args: Any, lazy: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand's name, loaded or not, sorted as click sorts them."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand, importing its module on first use (None: no such command)."""
        entry = self.lazy.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        command = entry.load()
        self.add_command(command, cmd_name)
        del self.lazy[cmd_name]
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Click's resolution, with "did you mean" drawn from every subcommand.

        Click suggests close names from the commands loaded so far, which here
        is none of them: an unknown name is reported from the whole list.
        """
        name = args[0] if args else ""
        known = self.list_commands(ctx)
        if name in known or name.startswith("-") or ctx.resilient_parsing:
            return super().resolve_command(ctx, args)
        if _NO_SUCH_COMMAND is not None:  # click >= 8.4: its own message and suggestions
            raise _NO_SUCH_COMMAND(name, possibilities=known, ctx=ctx)
        raise click.UsageError(f"No such command {name!r}.", ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The "Commands" section of ``--help``, from the short help kept as data.

        Each row is shortened by click's own rule (a stand-in command holding
        the short help as its help), so the listing reads exactly as click
        would print it with every module loaded.
        """
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            entry = self.lazy.get(name)
            command = (
                click.Command(name, help=entry.short_help)
                if entry is not None
                else super().get_command(ctx, name)
            )
            if command is not None and not command.hidden:
                rows.append((name, command))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl(
                [(name, command.get_short_help_str(limit)) for name, command in rows]
            )
