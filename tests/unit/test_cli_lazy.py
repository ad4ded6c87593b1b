"""``queue-ctl``'s lazy group: the table of subcommands is held to the commands themselves.

``queue-ctl --help`` lists every subcommand from the short help kept as data
in :data:`queue_engine.cli.ctl.COMMANDS`, without importing their modules;
these tests load every command and check that the table says what the
commands say, and that the listing reads exactly as click prints it with
every command loaded.
"""

from __future__ import annotations

import click
import pytest

from queue_engine.cli.ctl import COMMANDS, ctl
from queue_engine.cli.lazy import LazyCommand, LazyGroup


def _fresh_lazy() -> LazyGroup:
    """A copy of the ``queue-ctl`` group with nothing loaded (the module's group keeps what it loads)."""
    return LazyGroup(
        name="queue-ctl",
        lazy=COMMANDS,
        params=ctl.params,
        help=ctl.help,
        callback=ctl.callback,
        context_settings=ctl.context_settings,
    )


def _eager() -> click.Group:
    """The same group as click builds it with every subcommand imported."""
    return click.Group(
        name="queue-ctl",
        commands={name: entry.load() for name, entry in COMMANDS.items()},
        params=ctl.params,
        help=ctl.help,
        callback=ctl.callback,
        context_settings=ctl.context_settings,
    )


def _help(group: click.Group, width: int) -> str:
    ctx = click.Context(group, info_name="queue-ctl", terminal_width=width, max_content_width=100)
    return group.get_help(ctx)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_entry_names_its_command_and_its_short_help(name: str) -> None:
    """The entry loads a click command of that name, whose first docstring sentence is the entry's."""
    command = COMMANDS[name].load()
    assert command.name == name
    assert not command.hidden
    assert COMMANDS[name].short_help == command.get_short_help_str(limit=10_000), (
        f"ctl.COMMANDS[{name!r}] is out of date: copy the first sentence of the command's docstring"
    )


@pytest.mark.parametrize("width", [60, 80, 120])
def test_help_lists_every_command_as_click_would(width: int) -> None:
    """``queue-ctl --help`` from the table equals click's own listing with every command loaded."""
    lazy = _fresh_lazy()
    shown = _help(lazy, width)
    assert shown == _help(_eager(), width)
    assert lazy.commands == {}  # and listing them loaded none
    for name in COMMANDS:
        assert f"\n  {name} " in shown


def test_a_command_is_loaded_on_first_use_and_kept() -> None:
    """``get_command`` imports the one module asked for and keeps the command."""
    lazy = _fresh_lazy()
    ctx = click.Context(lazy)
    status = lazy.get_command(ctx, "status")
    assert isinstance(status, click.Command) and status.name == "status"
    assert set(lazy.commands) == {"status"}
    assert lazy.get_command(ctx, "status") is status
    assert lazy.get_command(ctx, "no-such") is None
    assert lazy.list_commands(ctx) == sorted(COMMANDS)


def test_an_unknown_command_suggests_from_every_command() -> None:
    """A typo gets click's usage error, with close names taken from the whole table."""
    lazy = _fresh_lazy()
    with pytest.raises(click.UsageError) as caught:
        lazy.main(["statu"], prog_name="queue-ctl", standalone_mode=False)
    message = caught.value.format_message()
    assert message.startswith("No such command 'statu'.")
    if hasattr(click.exceptions, "NoSuchCommand"):  # click >= 8.4 suggests close names
        assert "'status'" in message


def test_a_target_that_is_not_a_command_is_refused() -> None:
    """A table entry pointing at something else is a clear error, not an AttributeError later."""
    with pytest.raises(TypeError, match="is not a click command"):
        LazyCommand("queue_engine.cli.ctl:COMMANDS", "Nothing.").load()
