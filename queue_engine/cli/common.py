"""What every console script shares: error handling, DSN/schema and log options, input.

Contract: bad input or an unavailable database gives one line on stderr and a
non-zero exit code (documented in docs/reference/exit-codes.md), never a
traceback; set ``QUEUE_ENGINE_DEBUG=1`` to see the traceback of an unexpected error.
A server error that reaches the top is one line too: Postgres messages span
several (``DETAIL``, ``HINT``, ``CONTEXT``, ``LINE 1: ...``), so
:func:`server_error_line` keeps the primary message, the first line of the
detail and the SQLSTATE.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from queue_engine.foundation import settings
from queue_engine.foundation.errors import QueueEngineError
from queue_engine.foundation.exit_codes import ExitCode

if TYPE_CHECKING:
    import psycopg

#: Raised by click >= 8.2 when a group is called with no arguments; a UsageError before.
NO_ARGS_IS_HELP: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", click.UsageError
)


def one_line(text: str) -> str:
    """The first non-empty line of ``text``, stripped (the whole text if it has none)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return text.strip()


def fail(prog: str, message: str, code: int) -> NoReturn:
    """Print ``prog: error: message`` on one line and exit.

    Only the first line of a multi-line ``message`` is printed: the contract is
    one line on stderr, whatever an exception's text looks like.
    """
    click.echo(f"{prog}: error: {one_line(message)}", err=True)
    sys.exit(code)


def server_error_line(exc: psycopg.Error) -> str:
    """A database error as one line: primary message, first line of the detail, SQLSTATE.

    ``str(exc)`` of a server error is the primary message followed by
    ``DETAIL:``/``HINT:``/``CONTEXT:`` lines or a ``LINE 1:`` excerpt with a
    caret; the detail often says what the primary message does not
    (``\\u0000 cannot be converted to text.``), so its first line is kept.
    """
    diag = exc.diag
    primary = one_line(diag.message_primary or str(exc) or type(exc).__name__)
    detail = one_line(diag.message_detail or "")
    text = f"{primary} ({detail})" if detail else primary
    state = exc.sqlstate
    return f"{text} [SQLSTATE {state}]" if state else text


def server_error_code(exc: psycopg.Error) -> ExitCode:
    """69 when the connection was lost (the server went away mid-command), else 70.

    :func:`queue_engine.foundation.db.is_connection_error` draws the line: class 08 and
    the server shutting down are an unavailable database; any other server
    error the engine did not turn into its own exception is a bug.
    """
    import psycopg

    from queue_engine.foundation.db import is_connection_error

    if isinstance(exc, psycopg.OperationalError) and is_connection_error(exc):
        return ExitCode.UNAVAILABLE
    return ExitCode.SOFTWARE


def _driver_error(exc: Exception) -> psycopg.Error | None:
    """``exc`` as a psycopg error, or None; never imports the driver.

    Every console script runs through :func:`run_cli`, and importing psycopg
    costs about a tenth of a second: ``--help`` and the commands that never
    touch a database must not pay it. An error can only be a driver error if
    the driver was loaded.
    """
    if "psycopg" not in sys.modules:
        return None
    import psycopg

    return exc if isinstance(exc, psycopg.Error) else None


def legacy_notices(prog: str, reads: frozenset[str] = frozenset()) -> None:
    """Print one ``prog: notice:`` line per old system's variable in the environment.

    ``reads`` are old names this command does read (``queue-ctl up`` reads
    ``WORKERS_JSON``). ``QUEUE_ENGINE_LEGACY_NOTICE=off`` silences the lines,
    for an environment that keeps such names for the application's own code.
    The scan is of the environment's names against a frozenset: no import
    beyond the table, so start-up time does not notice it.
    """
    if settings.LEGACY_NOTICE.read() == "off":
        return
    from queue_engine.foundation.legacy_settings import notices

    for line in notices(os.environ, reads):
        click.echo(f"{prog}: notice: {line}", err=True)


def run_cli(
    command: click.Command, prog: str, argv: list[str] | None = None, *, notice: bool = True
) -> NoReturn:
    """Run a click command, turning every failure into one line and an exit code.

    With ``notice`` (the daemons), old systems' variables found in the
    environment are noticed first (:func:`legacy_notices`); ``queue-ctl``
    notices them in its group instead, where it knows which subcommand runs.
    """
    try:
        if notice:
            legacy_notices(prog)
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
        driver_error = _driver_error(exc)
        if driver_error is None:
            fail(
                prog,
                f"internal error: {type(exc).__name__}: {one_line(str(exc))} "
                "(set QUEUE_ENGINE_DEBUG=1 for the traceback)",
                ExitCode.SOFTWARE,
            )
        code = server_error_code(driver_error)
        what = "lost the database" if code == ExitCode.UNAVAILABLE else "database error"
        hint = (
            "" if code == ExitCode.UNAVAILABLE else " (set QUEUE_ENGINE_DEBUG=1 for the traceback)"
        )
        fail(prog, f"{what}: {type(exc).__name__}: {server_error_line(driver_error)}{hint}", code)
    sys.exit(result if isinstance(result, int) else ExitCode.OK)


def setup_logging(level: str = "INFO") -> None:
    """Log to stderr in a compact format."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


F = TypeVar("F", bound=Callable[..., Any])


# Not ``click.ParamType[float]``: the class is generic only in recent click, and we support 8.1.
class Duration(click.ParamType):  # type: ignore[type-arg]
    """A length of time in seconds, in the one grammar of :func:`settings.parse_duration`.

    Every command-line option that takes a duration uses this type, so
    ``queue-claim-worker --max-age 2w`` and ``queue-ctl prune --older-than 2w``
    read the same text the same way as ``QUEUE_ENGINE_MAX_AGE=2w`` does. With
    a ``setting``, the value is also held to the setting's bounds; a bad value
    is one line naming the option (exit 2).
    """

    name = "duration"

    def __init__(self, setting: settings.Setting[Any] | None = None) -> None:
        self.setting = setting

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Seconds from ``value``.

        A number (a default) passes as it is; for a setting, an empty text
        means unset, as it does in the environment.
        """
        if not isinstance(value, str):
            return value
        if self.setting is not None and not value.strip():
            return None
        try:
            seconds = settings.parse_duration(value)
        except ValueError as exc:
            self.fail(f"{value!r} {exc}", param, ctx)
        problem = None if self.setting is None else self.setting.problem(seconds)
        if problem is not None:
            self.fail(f"{value!r} {problem}", param, ctx)
        return seconds


def option_help(setting: settings.Setting[Any]) -> str:
    """An option's help: its setting's doc as a sentence, so the help and the reference agree."""
    text = setting.doc[:1].upper() + setting.doc[1:]
    if setting.default_text == "required":
        text += " (required)"
    return text + "."


def setting_option(
    setting: settings.Setting[Any], *param_decls: str, **attrs: Any
) -> Callable[[F], F]:
    """A click option for a setting of the table: its flag, variable, default, bounds and help.

    The table (:mod:`queue_engine.foundation.settings`) is the one source of the option
    name, ``envvar``, default and meaning (the help is the setting's doc, as
    ``docs/reference/configuration.md`` states it), so a command line and a
    settings object cannot disagree about a default, nor the help and the
    reference about what the option does; ``attrs`` may add a ``metavar`` or a
    narrower ``type``, never a help of its own.
    """
    if setting.option is None:
        raise ValueError(f"{setting.env} has no command-line option")
    if "help" in attrs:
        raise TypeError(f"{setting.option}: the help comes from the table's doc of {setting.env}")
    attrs["help"] = option_help(setting)
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
    elif setting.parse is settings.parse_duration:
        attrs.setdefault("type", Duration(setting))
    return click.option(setting.option, *param_decls, **attrs)


def dsn_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--dsn`` (env ``QUEUE_ENGINE_DSN``; libpq ``PG*`` variables when neither is set)."""
    return setting_option(settings.DSN)(func)


def schema_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--schema`` (env ``QUEUE_ENGINE_SCHEMA``, default ``queue_engine``)."""
    return setting_option(settings.SCHEMA)(func)


LOG_LEVELS = settings.LOG_LEVEL.choices


def log_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--log-format`` and ``--log-level``, the same for every daemon."""
    func = setting_option(settings.LOG_LEVEL)(func)
    return setting_option(settings.LOG_FORMAT)(func)


def embedded_folder_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--data-dir`` and ``--keep``: where an embedded Postgres lives, and whether it stays."""
    func = click.option(
        "--keep",
        is_flag=True,
        help="Keep the embedded database folder afterwards (a folder that existed is always kept).",
    )(func)
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Folder of the embedded Postgres (default: a new temp folder of its own); "
        "refused while another server runs there.",
    )(func)


def use_color(choice: str) -> bool:
    """``always``/``never``, or ``auto``: a terminal on stdout and no ``NO_COLOR`` variable."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def color_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--color auto|always|never`` for the commands that colour states."""
    return click.option(
        "--color",
        "color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour states (auto: when stdout is a terminal and NO_COLOR is unset).",
    )(func)


def parse_json_args(raw: str, option: str = "--args") -> dict[str, Any]:
    """Parse a JSON object given on the command line; a clear ValidationError otherwise."""
    from queue_engine.foundation.errors import ValidationError

    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{option} is not valid JSON: {exc.msg} at position {exc.pos}"
        ) from None
    if not isinstance(value, dict):
        raise ValidationError(f"{option} must be a JSON object, e.g. '{{\"n\": 1}}'")
    return value
