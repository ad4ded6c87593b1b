"""Contract: ``queue-ctl`` as an operator runs it, as a real subprocess.

migrate/enqueue/status/cancel/retry/list print what they did (``--json`` prints
whole jobs); every error is one line on stderr starting ``queue-ctl: error:``,
never a traceback, with the documented exit code (2 usage, 1 refused operation,
3 schema missing, 69 database unreachable, without ever echoing the password);
the DSN comes from ``--dsn``, ``QUEUE_ENGINE_DSN`` or the libpq ``PG*`` variables;
``queue-ctl demo`` runs end to end on a given database.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from support.ctl import ok, queue_ctl

from queue_engine import Client
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION
from queue_engine.producer.workflows import Workflow

UNREACHABLE = "postgresql://u:s3cretpw@127.0.0.1:1/x"


def assert_one_line_error(
    result: subprocess.CompletedProcess[str], code: int, *fragments: str
) -> str:
    """The error contract: exit code, one stderr line with the prefix, no traceback."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("queue-ctl: error:"), line
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in line, line
    return line


def enqueue_id(dsn: str, *args: str) -> int:
    out = ok(queue_ctl("--dsn", dsn, "enqueue", *args)).strip()
    assert re.fullmatch(r"\d+", out), out
    return int(out)


def db_row(dsn: str, sql: str, params: Any = None) -> tuple[Any, ...] | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchone()


# --- happy paths ----------------------------------------------------------------------------


def test_version_and_help() -> None:
    assert "0.1.0" in ok(queue_ctl("--version"))
    helptext = ok(queue_ctl("--help"))
    for command in ("migrate", "enqueue", "status", "cancel", "retry", "list", "demo"):
        assert command in helptext


def test_migrate_prints_the_version(empty_dsn: str) -> None:
    out = ok(queue_ctl("--dsn", empty_dsn, "migrate"))
    assert f"database is at version {ENGINE_SCHEMA_VERSION}" in out
    assert db_row(empty_dsn, "SELECT max(version) FROM queue_engine.schema_migrations") == (
        ENGINE_SCHEMA_VERSION,
    )


def test_enqueue_prints_an_integer_id(dsn: str) -> None:
    job_id = enqueue_id(dsn, "reports.build", "--queue", "reports", "--args", '{"n": 7}')
    assert db_row(
        dsn,
        "SELECT task, queue, args, status, producer FROM queue_engine.jobs WHERE id = %s",
        (job_id,),
    ) == ("reports.build", "reports", {"n": 7}, "queued", "queue-ctl")


def test_enqueue_json_prints_the_whole_job(dsn: str) -> None:
    out = ok(
        queue_ctl(
            "--dsn",
            dsn,
            "enqueue",
            "reports.build",
            "--queue",
            "reports",
            "--args",
            '{"n": 1}',
            "--priority",
            "5",
            "--idempotency-key",
            "abc",
            "--json",
        )
    )
    job = json.loads(out)
    assert isinstance(job["id"], int)
    assert job["task"] == "reports.build"
    assert job["queue"] == "reports"
    assert job["args"] == {"n": 1}
    assert job["status"] == "queued"
    assert job["priority"] == 5
    assert job["idempotency_key"] == "abc"
    assert job["created"] is True
    assert {"available_at", "created_at", "attempt", "max_attempts"} <= set(job)
    # The same idempotency key returns the same job, not a new one.
    again = json.loads(
        ok(
            queue_ctl(
                "--dsn", dsn, "enqueue", "reports.build", "--idempotency-key", "abc", "--json"
            )
        )
    )
    assert again["id"] == job["id"]
    assert again["created"] is False


def test_status_shows_fields(dsn: str) -> None:
    job_id = enqueue_id(dsn, "mail.send", "--queue", "mail", "--args", '{"to": "x@y.z"}')
    out = ok(queue_ctl("--dsn", dsn, "status", str(job_id)))
    fields = dict(
        (part.strip() for part in line.split(":", 1)) for line in out.splitlines() if ":" in line
    )
    assert fields["id"] == str(job_id)
    assert fields["task"] == "mail.send"
    assert fields["queue"] == "mail"
    assert fields["status"] == "queued"
    assert fields["attempt"] == "0/5"
    assert json.loads(fields["args"]) == {"to": "x@y.z"}


def test_status_json(dsn: str) -> None:
    job_id = enqueue_id(dsn, "mail.send", "--queue", "mail")
    job = json.loads(ok(queue_ctl("--dsn", dsn, "status", str(job_id), "--json")))
    assert (job["id"], job["task"], job["queue"], job["status"]) == (
        job_id,
        "mail.send",
        "mail",
        "queued",
    )


def test_cancel_then_retry(dsn: str) -> None:
    job_id = enqueue_id(dsn, "t.cancel_me")
    assert f"job {job_id} canceled" in ok(queue_ctl("--dsn", dsn, "cancel", str(job_id)))
    assert db_row(dsn, "SELECT status FROM queue_engine.jobs WHERE id = %s", (job_id,)) == (
        "canceled",
    )
    assert f"job {job_id} queued again" in ok(queue_ctl("--dsn", dsn, "retry", str(job_id)))
    assert db_row(
        dsn, "SELECT status, cancel_requested FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ) == ("queued", False)


def test_cancel_of_a_running_job_requests_it(dsn: str) -> None:
    job_id = enqueue_id(dsn, "t.long")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'w1', "
            "started_at = now() WHERE id = %s",
            (job_id,),
        )
    out = ok(queue_ctl("--dsn", dsn, "cancel", str(job_id)))
    assert "cancel requested" in out
    assert db_row(
        dsn, "SELECT status, cancel_requested FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ) == ("running", True)


def test_list_with_filters_and_json(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        first, second, third = (
            r[0]
            for r in conn.execute(
                "INSERT INTO queue_engine.jobs (task, queue) "
                "VALUES ('t.one', 'alpha'), ('t.two', 'beta'), ('t.three', 'alpha') "
                "RETURNING id"
            ).fetchall()
        )
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'canceled', finished_at = now() WHERE id = %s",
            (second,),
        )

    table = ok(queue_ctl("--dsn", dsn, "list"))
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["ID", "STATUS", "QUEUE", "TASK"]
    assert [int(line.split()[0]) for line in lines[1:]] == [third, second, first]

    canceled = ok(queue_ctl("--dsn", dsn, "list", "--status", "canceled"))
    assert [int(line.split()[0]) for line in canceled.splitlines()[1:]] == [second]

    as_json = json.loads(ok(queue_ctl("--dsn", dsn, "list", "--json")))
    assert [j["id"] for j in as_json] == [third, second, first]
    assert [j["status"] for j in as_json] == ["queued", "canceled", "queued"]

    alpha = json.loads(ok(queue_ctl("--dsn", dsn, "list", "--queue", "alpha", "--json")))
    assert [j["id"] for j in alpha] == [third, first]
    queued = json.loads(ok(queue_ctl("--dsn", dsn, "list", "--status", "queued", "--json")))
    assert {j["id"] for j in queued} == {first, third}
    limited = json.loads(ok(queue_ctl("--dsn", dsn, "list", "--limit", "1", "--json")))
    assert [j["id"] for j in limited] == [third]


def test_list_older_than(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        old, mid, new = (
            r[0]
            for r in conn.execute(
                "INSERT INTO queue_engine.jobs (task, created_at) VALUES "
                "('t.old', now() - interval '2 days'), ('t.mid', now() - interval '10 minutes'), "
                "('t.new', now()) RETURNING id"
            ).fetchall()
        )

    def listed(*args: str) -> list[int]:
        return [j["id"] for j in json.loads(ok(queue_ctl("--dsn", dsn, "list", "--json", *args)))]

    assert listed("--older-than", "5m") == [mid, old]
    assert listed("--older-than", "1d") == [old]
    assert listed("--older-than", "2h", "--task", "t.mid") == []
    assert listed("--older-than", "30s", "--limit", "1") == [mid]
    assert listed("--older-than", "3600") == [old]
    assert listed("--older-than", "3w") == []
    assert new in listed()
    table = ok(queue_ctl("--dsn", dsn, "list", "--older-than", "1d")).splitlines()
    assert [int(line.split()[0]) for line in table[1:]] == [old]
    bad = queue_ctl("--dsn", dsn, "list", "--older-than", "soon")
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "--older-than" in bad.stderr


def test_list_of_an_empty_queue(dsn: str) -> None:
    assert json.loads(ok(queue_ctl("--dsn", dsn, "list", "--json"))) == []


def test_a_delayed_job_and_an_input_node_read_as_what_they_are(dsn: str) -> None:
    """Display only: ``scheduled`` / ``awaiting input`` in the text, the stored status in JSON."""
    job_id = int(ok(queue_ctl("--dsn", dsn, "enqueue", "report.build", "--delay", "600")))
    status = ok(queue_ctl("--dsn", dsn, "status", str(job_id)))
    assert re.search(r"status: scheduled, runs in 9m5\ds \(queued until then\)", status)
    wf = Workflow("gate")
    wf.input("approve")
    with Client(dsn) as client:
        info = client.start_workflow(wf)
    rows = {
        int(line.split()[0]): line for line in ok(queue_ctl("--dsn", dsn, "list")).splitlines()[1:]
    }
    assert re.search(r"\bscheduled\b.*report\.build.*\bin 9m5\ds$", rows[job_id])
    (node_id,) = set(rows) - {job_id}
    assert (
        "awaiting input" in rows[node_id]
        and f"input approve of workflow {info.id}" in rows[node_id]
    )
    assert "queue-engine:input" not in rows[node_id]
    shown = ok(queue_ctl("--dsn", dsn, "show", str(job_id)))
    assert "status: scheduled, runs in" in shown
    stored = {
        j["id"]: j["status"] for j in json.loads(ok(queue_ctl("--dsn", dsn, "list", "--json")))
    }
    assert stored == {job_id: "queued", node_id: "waiting"}


# --- errors ----------------------------------------------------------------------------------


def test_bad_job_input_is_a_usage_error(dsn: str) -> None:
    for raw in ("{not json", "[1, 2]"):
        result = queue_ctl("--dsn", dsn, "enqueue", "t.x", "--args", raw)
        assert_one_line_error(result, 2, "--args")
    assert_one_line_error(queue_ctl("--dsn", dsn, "enqueue", "bad task name"), 2)
    assert db_row(dsn, "SELECT count(*) FROM queue_engine.jobs") == (0,)


def test_unknown_job_id_fails_with_1(dsn: str) -> None:
    for command in ("status", "cancel", "retry"):
        assert_one_line_error(queue_ctl("--dsn", dsn, command, "987654"), 1, "987654", "not found")


def test_invalid_transitions_fail_with_1(dsn: str) -> None:
    job_id = enqueue_id(dsn, "t.x")
    assert_one_line_error(
        queue_ctl("--dsn", dsn, "retry", str(job_id)), 1, "cannot retry", "queued"
    )
    ok(queue_ctl("--dsn", dsn, "cancel", str(job_id)))
    assert_one_line_error(queue_ctl("--dsn", dsn, "cancel", str(job_id)), 1, "cannot cancel")
    assert db_row(dsn, "SELECT status FROM queue_engine.jobs WHERE id = %s", (job_id,)) == (
        "canceled",
    )


@pytest.mark.parametrize("args", [("list",), ("migrate",)])
def test_unreachable_database_exits_69_without_the_password(args: tuple[str, ...]) -> None:
    result = queue_ctl("--dsn", UNREACHABLE, *args)
    line = assert_one_line_error(result, 69, "127.0.0.1")
    assert "s3cretpw" not in result.stdout + result.stderr
    assert "s3cretpw" not in line


def test_unreachable_database_from_env_hides_the_password() -> None:
    result = queue_ctl("list", env={"QUEUE_ENGINE_DSN": UNREACHABLE})
    assert_one_line_error(result, 69)
    assert "s3cretpw" not in result.stdout + result.stderr


def test_unparsable_dsn_is_a_configuration_error_not_unreachable() -> None:
    result = queue_ctl("--dsn", "host=x port=5432 password=s3cretpw =broken", "list")
    assert_one_line_error(result, 2, "invalid DSN")
    assert "s3cretpw" not in result.stdout + result.stderr


def test_missing_engine_schema_exits_3(empty_dsn: str) -> None:
    for args in (("list",), ("enqueue", "t.x"), ("retry", "1")):
        assert_one_line_error(queue_ctl("--dsn", empty_dsn, *args), 3, "queue-ctl migrate")
    # Reporting the missing schema created nothing.
    assert db_row(empty_dsn, "SELECT to_regnamespace('queue_engine')") == (None,)


@pytest.mark.parametrize("schema", ["Bad-Schema", "x" * 41])
def test_bad_schema_is_a_usage_error(pg_server: Any, schema: str) -> None:
    dsn = pg_server.admin_dsn
    assert_one_line_error(queue_ctl("--dsn", dsn, "--schema", schema, "list"), 2, "schema")
    result = queue_ctl("--dsn", dsn, "list", env={"QUEUE_ENGINE_SCHEMA": schema})
    assert_one_line_error(result, 2, "schema")


def test_unknown_command_and_option_are_usage_errors(pg_server: Any) -> None:
    dsn = pg_server.admin_dsn
    assert_one_line_error(queue_ctl("--dsn", dsn, "frobnicate"), 2)
    assert_one_line_error(queue_ctl("--dsn", dsn, "list", "--no-such-option"), 2)
    assert_one_line_error(queue_ctl("--dsn", dsn, "list", "--status", "bogus"), 2)
    assert_one_line_error(queue_ctl("--dsn", dsn, "status", "not-a-number"), 2)


# --- where the DSN comes from ----------------------------------------------------------------


def test_dsn_from_queue_engine_dsn(dsn: str) -> None:
    job_id = enqueue_id(dsn, "t.env")
    jobs = json.loads(ok(queue_ctl("list", "--json", env={"QUEUE_ENGINE_DSN": dsn})))
    assert [j["id"] for j in jobs] == [job_id]


def test_dsn_option_overrides_the_environment(dsn: str) -> None:
    job_id = enqueue_id(dsn, "t.env")
    out = ok(queue_ctl("--dsn", dsn, "list", "--json", env={"QUEUE_ENGINE_DSN": UNREACHABLE}))
    assert [j["id"] for j in json.loads(out)] == [job_id]


def test_dsn_from_libpq_variables(dsn: str) -> None:
    params = conninfo_to_dict(dsn)
    env = {
        "PGHOST": str(params["host"]),
        "PGPORT": str(params.get("port", 5432)),
        "PGUSER": str(params["user"]),
        "PGDATABASE": str(params["dbname"]),
    }
    job_id = enqueue_id_env(env, "t.pg", "--queue", "pgvars")
    jobs = json.loads(ok(queue_ctl("list", "--json", env=env)))
    assert [(j["id"], j["queue"]) for j in jobs] == [(job_id, "pgvars")]
    assert db_row(dsn, "SELECT queue FROM queue_engine.jobs WHERE id = %s", (job_id,)) == (
        "pgvars",
    )


def enqueue_id_env(env: dict[str, str], *args: str) -> int:
    out = ok(queue_ctl("enqueue", *args, env=env)).strip()
    assert re.fullmatch(r"\d+", out), out
    return int(out)


def test_custom_schema_through_the_cli(dsn: str) -> None:
    out = ok(queue_ctl("--dsn", dsn, "--schema", "cli_other", "migrate"))
    assert f"database is at version {ENGINE_SCHEMA_VERSION}" in out
    job_id = enqueue_id(dsn, "t.other")  # default schema
    other = json.loads(
        ok(queue_ctl("--dsn", dsn, "list", "--json", env={"QUEUE_ENGINE_SCHEMA": "cli_other"}))
    )
    assert other == []
    assert [j["id"] for j in json.loads(ok(queue_ctl("--dsn", dsn, "list", "--json")))] == [job_id]


# --- demo ------------------------------------------------------------------------------------


def test_demo_on_a_given_database(dsn: str) -> None:
    result = queue_ctl("--dsn", dsn, "demo", timeout=120)
    out = ok(result)
    assert "Traceback" not in out + result.stderr
    lines = [line for line in out.splitlines() if line.strip()]
    summary = [line for line in lines if line.startswith(("summary: ", "demo finished in "))]
    assert len(summary) == 1, out
    assert summary[0] == lines[-1], "the summary is the last thing the demo prints"
    with psycopg.connect(dsn, autocommit=True) as conn:
        statuses = dict(
            conn.execute(
                "SELECT status, count(*) FROM queue_engine.jobs WHERE queue = 'demo' "
                "GROUP BY status"
            ).fetchall()
        )
    assert sum(statuses.values()) > 0, "the demo enqueued nothing in the given database"
    if summary[0].startswith("summary: "):
        counts = {
            status: int(n)
            for status, n in (part.split() for part in summary[0][len("summary: ") :].split(", "))
        }
        assert counts == statuses
