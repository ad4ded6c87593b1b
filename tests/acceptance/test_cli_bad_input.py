"""``queue-ctl`` refuses a NUL character in args with one line and exit 2, writing nothing.

Before, ``queue-ctl enqueue t --args '{"a": "x\\u0000y"}'`` sent the args and
the server refused them: a four-line error and exit 70 (an internal error).
"""

from __future__ import annotations

import psycopg
import pytest
from support.ctl import queue_ctl


def jobs_and_schedules(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        jobs = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
        schedules = conn.execute("SELECT count(*) FROM queue_engine.schedules").fetchone()
    assert jobs is not None and schedules is not None
    return int(jobs[0]), int(schedules[0])


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"a": "x\\u0000y"}', "args['a']"),
        ('{"x\\u0000y": 1}', "the key 'x\\x00y' of args"),
        ('{"a": {"b": [1, "\\u0000"]}}', "args['a']['b'][1]"),
    ],
)
def test_enqueue_and_schedules_add_refuse_a_nul_in_args(dsn: str, raw: str, where: str) -> None:
    for command in (
        ("enqueue", "t.x", "--args", raw),
        ("schedules", "add", "nul", "every 1m", "--task", "t.x", "--args", raw),
    ):
        result = queue_ctl("--dsn", dsn, *command)
        assert result.returncode == 2, (command, result.returncode, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("queue-ctl: error: "), lines[0]
        assert "NUL character" in lines[0] and where in lines[0], lines[0]
    assert jobs_and_schedules(dsn) == (0, 0)


def test_a_server_error_is_one_line_with_its_sqlstate(dsn: str) -> None:
    # A read-only session makes the insert fail on the server, past validation.
    result = queue_ctl(
        "--dsn", dsn, "enqueue", "t.x", env={"PGOPTIONS": "-c default_transaction_read_only=on"}
    )
    assert result.returncode == 70, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("queue-ctl: error: database error: "), lines[0]
    assert "read-only transaction" in lines[0] and "[SQLSTATE 25006]" in lines[0], lines[0]
