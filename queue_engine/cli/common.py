"""What every console script shares: error handling, DSN/schema and log options, input.

Contract: bad input or an unavailable database gives one line on stderr and a
non-zero exit code (documented in docs/reference/exit-codes.md), never a
traceback; set ``QUEUE_ENGINE_DEBUG=1`` to see the traceback of an unexpected error.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from queue_engine import settings
from queue_engine.errors import QueueEngineError
from queue_engine.exit_codes import ExitCode

#: Raised by click >= 8.2 when a group is called with no arguments; a UsageError before.
NO_ARGS_IS_HELP: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", click.UsageError
)


def fail(prog: str, message: str, code: int) -> NoReturn:
    """Print ``prog: error: message`` on one line and exit."""
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(code)


def run_cli(command: click.Command, prog: str, argv: list[str] | None = None) -> NoReturn:
    """Run a click command, turning every failure into one line and an exit code."""
    try:
        result = command.main(args=argv, prog_name=prog, standalone_mode=False)
    except NO_ARGS_IS_HELP as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(ExitCode.USAGE)
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        fail(prog, f"{exc.format_message()}{hint}", ExitCode.USAGE)
    except click.Abort:
        fail(prog, "aborted", ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        fail(prog, exc.format_message(), exc.exit_code)
    except QueueEngineError as exc:
        fail(prog, str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail(prog, "interrupted", ExitCode.INTERRUPTED)
    except Exception as exc:
        if settings.DEBUG.read():
            traceback.print_exc()
        fail(
            prog,
            f"internal error: {type(exc).__name__}: {exc} (set QUEUE_ENGINE_DEBUG=1 for the traceback)",
            ExitCode.SOFTWARE,
        )
    sys.exit(result if isinstance(result, int) else ExitCode.OK)


def setup_logging(level: str = "INFO") -> None:
    """Log to stderr in a compact format."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


F = TypeVar("F", bound=Callable[..., Any])


def setting_option(
    setting: settings.Setting[Any], *param_decls: str, **attrs: Any
) -> Callable[[F], F]:
    """A click option for a setting of the table: its flag, variable, default and bounds.

    The table (:mod:`queue_engine.settings`) is the one source of the option
    name, ``envvar`` and default, so a command line and a settings object
    cannot disagree about a default; ``attrs`` add the help text (and may
    override, e.g. to drop the default of an option that must be passed).
    """
    if setting.option is None:
        raise ValueError(f"{setting.env} has no command-line option")
    attrs.setdefault("envvar", setting.env)
    attrs.setdefault("show_envvar", True)
    if setting.default is not None:
        attrs.setdefault("default", setting.default)
        attrs.setdefault("show_default", setting.default != "")
    if setting.choices:
        attrs.setdefault("type", click.Choice(setting.choices, case_sensitive=False))
    elif setting.parse is settings.parse_int:
        low, high = setting.minimum, setting.maximum
        attrs.setdefault(
            "type",
            click.IntRange(None if low is None else int(low), None if high is None else int(high)),
        )
    return click.option(setting.option, *param_decls, **attrs)


def dsn_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--dsn`` (env ``QUEUE_ENGINE_DSN``; libpq ``PG*`` variables when neither is set)."""
    option = setting_option(
        settings.DSN, help="libpq connection string or URI; unset: libpq PG* variables."
    )
    return option(func)


def schema_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--schema`` (env ``QUEUE_ENGINE_SCHEMA``, default ``queue_engine``)."""
    option = setting_option(settings.SCHEMA, help="Postgres schema holding the engine's tables.")
    return option(func)


LOG_LEVELS = settings.LOG_LEVEL.choices


def log_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--log-format`` and ``--log-level``, the same for every daemon."""
    func = setting_option(settings.LOG_LEVEL, help="Log verbosity (stderr).")(func)
    return setting_option(settings.LOG_FORMAT, help="text, or one JSON object per line.")(func)


def parse_json_args(raw: str, option: str = "--args") -> dict[str, Any]:
    """Parse a JSON object given on the command line; a clear ValidationError otherwise."""
    from queue_engine.errors import ValidationError

    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{option} is not valid JSON: {exc.msg} at position {exc.pos}"
        ) from None
    if not isinstance(value, dict):
        raise ValidationError(f"{option} must be a JSON object, e.g. '{{\"n\": 1}}'")
    return value
