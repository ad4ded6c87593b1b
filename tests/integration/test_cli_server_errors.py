"""A server error that reaches the command line is one line and a documented exit code.

Postgres messages span several lines (``DETAIL:``, ``HINT:``, ``CONTEXT:``,
a ``LINE 1:`` excerpt with a caret). :func:`queue_engine.cli.common.run_cli`
prints the primary message, the first line of the detail and the SQLSTATE on
one line: exit 69 when the connection was lost, 70 for any other server
error. The errors here are real ones, raised by the test server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
import psycopg
import pytest

from queue_engine.cli.common import run_cli

Conn = psycopg.Connection[Any]


def raised_by(dsn: str, action: Callable[[Conn], object]) -> psycopg.Error:
    """The exception a statement raises on a fresh connection to the test server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            action(conn)
        except psycopg.Error as exc:
            return exc
    raise AssertionError("the statement did not fail")


def cli_output(exc: BaseException, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run a command that raises ``exc`` through run_cli: its exit code and stderr."""

    @click.command()
    def boom() -> None:
        raise exc

    with pytest.raises(SystemExit) as info:
        run_cli(boom, "queue-ctl", [])
    code = info.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err


CASES: list[tuple[str, Callable[[Conn], object], int, tuple[str, ...]]] = [
    (
        "a NUL in jsonb (DETAIL and CONTEXT lines)",
        lambda c: c.execute("""SELECT '{"a": "\\u0000"}'::jsonb"""),
        70,
        ("UntranslatableCharacter", "cannot be converted to text", "[SQLSTATE 22P05]"),
    ),
    (
        "a syntax error (LINE 1 and a caret)",
        lambda c: c.execute("SELEC 1"),
        70,
        ("SyntaxError", 'syntax error at or near "SELEC"', "[SQLSTATE 42601]"),
    ),
    (
        "a raised exception with a multi-line message, detail and hint",
        lambda c: c.execute(
            "DO $$ BEGIN RAISE EXCEPTION E'first line\\nsecond line' "
            "USING DETAIL = E'detail one\\ndetail two', HINT = 'a hint'; END $$"
        ),
        70,
        ("first line (detail one) [SQLSTATE P0001]",),
    ),
    (
        "a NUL in a text parameter (refused by the driver, no SQLSTATE)",
        lambda c: c.execute("SELECT %s::text", ("a\x00b",)),
        70,
        ("DataError", "NUL"),
    ),
    (
        "the session terminated by the server",
        lambda c: c.execute("SELECT pg_terminate_backend(pg_backend_pid())"),
        69,
        ("lost the database", "[SQLSTATE 57P01]"),
    ),
]


@pytest.mark.parametrize(("what", "action", "code", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_a_server_error_is_one_line_and_its_exit_code(
    dsn: str,
    capsys: pytest.CaptureFixture[str],
    what: str,
    action: Callable[[Conn], object],
    code: int,
    fragments: tuple[str, ...],
) -> None:
    exc = raised_by(dsn, action)
    exit_code, err = cli_output(exc, capsys)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("queue-ctl: error: "), lines[0]
    assert exit_code == code, (what, err)
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in err


def test_any_multi_line_exception_is_printed_as_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    exit_code, err = cli_output(RuntimeError("first\nsecond\nthird"), capsys)
    assert exit_code == 70
    assert err.splitlines() == [
        "queue-ctl: error: internal error: RuntimeError: first "
        "(set QUEUE_ENGINE_DEBUG=1 for the traceback)"
    ]
