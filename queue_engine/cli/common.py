"""What every console script shares: error handling, DSN/schema and log options, input.

Contract: bad input or an unavailable database gives one line on stderr and a
non-zero exit code (documented in docs/reference/exit-codes.md), never a
traceback; set ``QUEUE_ENGINE_DEBUG=1`` to see the traceback of an unexpected error.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import click

from queue_engine.errors import QueueEngineError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE

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
        sys.exit(EXIT_USAGE)
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        fail(prog, f"{exc.format_message()}{hint}", EXIT_USAGE)
    except click.Abort:
        fail(prog, "aborted", 130)
    except click.ClickException as exc:
        fail(prog, exc.format_message(), exc.exit_code)
    except QueueEngineError as exc:
        fail(prog, str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail(prog, "interrupted", 130)
    except Exception as exc:
        if os.environ.get("QUEUE_ENGINE_DEBUG"):
            traceback.print_exc()
        fail(
            prog,
            f"internal error: {type(exc).__name__}: {exc} (set QUEUE_ENGINE_DEBUG=1 for the traceback)",
            EXIT_INTERNAL,
        )
    sys.exit(result if isinstance(result, int) else EXIT_OK)


def setup_logging(level: str = "INFO") -> None:
    """Log to stderr in a compact format."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def dsn_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--dsn`` (env ``QUEUE_ENGINE_DSN``; libpq ``PG*`` variables when neither is set)."""
    return click.option(
        "--dsn",
        envvar="QUEUE_ENGINE_DSN",
        default="",
        show_envvar=True,
        help="libpq connection string or URI; unset: libpq PG* variables.",
    )(func)


def schema_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--schema`` (env ``QUEUE_ENGINE_SCHEMA``, default ``queue_engine``)."""
    return click.option(
        "--schema",
        envvar="QUEUE_ENGINE_SCHEMA",
        default="queue_engine",
        show_default=True,
        show_envvar=True,
        help="Postgres schema holding the engine's tables.",
    )(func)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def log_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--log-format`` and ``--log-level``, the same for every daemon."""
    from queue_engine.logs import LOG_FORMATS

    func = click.option(
        "--log-level",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default="INFO",
        envvar="QUEUE_ENGINE_LOG_LEVEL",
        show_default=True,
        show_envvar=True,
        help="Log verbosity (stderr).",
    )(func)
    return click.option(
        "--log-format",
        type=click.Choice(LOG_FORMATS),
        default="text",
        show_default=True,
        envvar="QUEUE_ENGINE_LOG_FORMAT",
        show_envvar=True,
        help="text, or one JSON object per line.",
    )(func)


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
