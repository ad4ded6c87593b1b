"""Contract: ``queue-ctl schedules add|list|enable|disable|remove|run-now`` as a subprocess.

Each command does one thing and prints one short line (``list`` a table or JSON);
bad input is refused with one line on stderr naming the bad part and exit code 2;
an unknown schedule is one line and exit code 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.ctl import ok, queue_ctl

BIN = Path(sys.executable).parent
Conn = psycopg.Connection[Any]


def test_add_list_enable_disable_run_now_remove(dsn: str, conn: Conn) -> None:
    out = ok(
        queue_ctl(
            "--dsn",
            dsn,
            "schedules",
            "add",
            "cbr",
            "*/5 * * * *",
            "--task",
            "load_cbr",
            "--queue",
            "load.cbr",
            "--args",
            '{"source": "cbr"}',
            "--tz",
            "Europe/Moscow",
            "--catchup",
            "2",
            "--overlap",
            "skip",
        )
    )
    assert out.startswith("schedule cbr added: next slot ") and "+03:00" in out
    ok(queue_ctl("--dsn", dsn, "schedules", "add", "ping", "every 30s", "--task", "ping"))
    table = ok(queue_ctl("--dsn", dsn, "schedules", "list")).splitlines()
    assert table[0].split()[:3] == ["NAME", "EXPRESSION", "TZ"]
    assert [line.split()[0] for line in table[1:]] == ["cbr", "ping"]
    listed = {
        s["name"]: s for s in json.loads(ok(queue_ctl("--dsn", dsn, "schedules", "list", "--json")))
    }
    cbr = listed["cbr"]
    assert (cbr["expression"], cbr["tz"], cbr["task"], cbr["queue"]) == (
        "*/5 * * * *",
        "Europe/Moscow",
        "load_cbr",
        "load.cbr",
    )
    assert (cbr["enabled"], cbr["source"], cbr["catchup"], cbr["overlap"]) == (
        True,
        "cli",
        2,
        "skip",
    )
    assert cbr["args"] == {"source": "cbr"} and cbr["last_slot"] is None
    assert cbr["next_fire"].endswith("+03:00")

    assert (
        ok(queue_ctl("--dsn", dsn, "schedules", "disable", "cbr")).strip()
        == "schedule cbr disabled"
    )
    assert (
        json.loads(ok(queue_ctl("--dsn", dsn, "schedules", "list", "--json")))[0]["next_fire"]
        is None
    )
    assert (
        ok(queue_ctl("--dsn", dsn, "schedules", "enable", "cbr")).strip() == "schedule cbr enabled"
    )

    job_id = int(ok(queue_ctl("--dsn", dsn, "schedules", "run-now", "cbr")).strip())
    row = conn.execute(
        "SELECT task, queue, args, producer FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    assert row[0:2] == ("load_cbr", "load.cbr")
    assert row[2]["_schedule"] == {"schedule": "cbr", "slot": None, "reason": "manual"}
    assert row[3] == "queue-ctl"
    assert (
        int(ok(queue_ctl("--dsn", dsn, "schedules", "run-now", "cbr")).strip()) != job_id
    )  # not deduplicated

    assert (
        ok(queue_ctl("--dsn", dsn, "schedules", "remove", "ping")).strip()
        == "schedule ping removed"
    )
    assert [
        s["name"] for s in json.loads(ok(queue_ctl("--dsn", dsn, "schedules", "list", "--json")))
    ] == ["cbr"]


def test_add_replace(dsn: str) -> None:
    ok(queue_ctl("--dsn", dsn, "schedules", "add", "x", "every 1m", "--task", "t"))
    dup = queue_ctl("--dsn", dsn, "schedules", "add", "x", "every 2m", "--task", "t")
    assert dup.returncode == 1
    assert dup.stderr.strip() == (
        "queue-ctl: error: schedule 'x' already exists: pass --replace to change it, or remove it first"
    )
    assert "replaced" in ok(
        queue_ctl("--dsn", dsn, "schedules", "add", "x", "every 2m", "--task", "t", "--replace")
    )
    assert (
        json.loads(ok(queue_ctl("--dsn", dsn, "schedules", "list", "--json")))[0]["expression"]
        == "every 2m"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["add", "x", "*/5 * * 13 *", "--task", "t"],
            "invalid cron expression '*/5 * * 13 *': month field '13' out of range 1-12",
        ),
        (
            ["add", "x", "* * * * *", "--task", "t", "--tz", "Mars/Base"],
            "unknown time zone 'Mars/Base'",
        ),
        (["add", "x", "every 3 weeks", "--task", "t"], "invalid interval 'every 3 weeks'"),
        (["add", "bad name", "* * * * *", "--task", "t"], "invalid schedule name 'bad name'"),
        (
            ["add", "x", "* * * * *", "--task", "t", "--catchup", "5000"],
            "catchup must be an integer between 0 and 1000",
        ),
        (["add", "x", "* * * * *", "--task", "t", "--args", "[1]"], "--args must be a JSON object"),
        (
            ["add", "x", "* * * * *", "--task", "t", "--args", '{"_schedule": 1}'],
            "'_schedule' is reserved",
        ),
        (
            ["add", "x", "* * * * *", "--task", "t", "--overlap", "queue"],
            "'queue' is not one of 'allow', 'skip'",
        ),
        (["add", "x", "* * * * *"], "Missing option '--task'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(dsn: str, args: list[str], message: str) -> None:
    done = queue_ctl("--dsn", dsn, "schedules", *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("queue-ctl: error: ")
    assert message in lines[0]


@pytest.mark.parametrize("command", ["enable", "disable", "remove", "run-now"])
def test_unknown_schedule_is_one_line_and_exit_1(dsn: str, command: str) -> None:
    done = queue_ctl("--dsn", dsn, "schedules", command, "nope")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "queue-ctl: error: schedule 'nope' not found (see `queue-ctl schedules list`)"
    )


def test_missing_schema_says_run_migrate(empty_dsn: str) -> None:
    done = queue_ctl("--dsn", empty_dsn, "schedules", "list")
    assert done.returncode == 3
    assert "run `queue-ctl migrate`" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
