"""``queue-ctl limits set / list / clear``, against a real Postgres, as an operator runs them.

The limit's effect on the claim is ``test_concurrency_limit_claim.py``'s; here:
the rows each command writes, its output, and the refusals (bad key or limit:
exit 2, one line, before connecting, nothing written).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from support.ctl import ok, queue_ctl

from queue_engine.foundation.errors import ValidationError
from queue_engine.operator.limits import (
    clear_limit,
    clear_rate,
    list_limits,
    parse_burst,
    parse_key_rate,
    parse_limit,
    set_limit,
    set_rate,
)

S = "queue_engine"


def limits_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT key, max_running FROM queue_engine.concurrency_limits ORDER BY key"
    ).fetchall()


def test_set_list_clear_as_an_operator_runs_them(dsn: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, claimed_by, started_at,"
        " lease_expires_at, concurrency_key) VALUES ('q', 't', 'running', 1, 'w', now(),"
        " now() + interval '1 minute', 'src:erp')"
    )
    out = ok(queue_ctl("--dsn", dsn, "limits", "set", "src:erp", "3"))
    assert out.strip() == "key src:erp limited to 3 running (was: none; running now: 1)"
    out = ok(queue_ctl("--dsn", dsn, "limits", "set", "src:erp", "0"))
    assert "(was: 3; running now: 1); none of its jobs starts" in out
    ok(queue_ctl("--dsn", dsn, "limits", "set", "api", "10"))
    assert limits_rows(conn) == [("api", 10), ("src:erp", 0)]
    listed = ok(queue_ctl("--dsn", dsn, "limits", "list")).splitlines()
    assert listed[0].split() == [
        "KEY",
        "LIMIT",
        "RUNNING",
        "WAITING",
        "RATE",
        "BURST",
        "TOKENS",
        "SET",
        "AT",
    ]
    assert [line.split()[:3] for line in listed[1:]] == [["api", "10", "0"], ["src:erp", "0", "1"]]
    as_json = json.loads(ok(queue_ctl("--dsn", dsn, "limits", "list", "--json")))
    assert [(r["key"], r["max_running"], r["running"]) for r in as_json] == [
        ("api", 10, 0),
        ("src:erp", 0, 1),
    ]
    out = ok(queue_ctl("--dsn", dsn, "limits", "clear", "src:erp"))
    assert out.strip() == "key src:erp limit 0 removed: its jobs follow their own limit"
    out = ok(queue_ctl("--dsn", dsn, "limits", "clear", "src:erp"))
    assert out.strip() == "key src:erp had no limit set (unchanged)"
    assert limits_rows(conn) == [("api", 10)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("set", "k", "-1"), "invalid limit '-1'"),
        (("set", "k", "10001"), "invalid limit '10001'"),
        (("set", "k", "two"), "invalid limit 'two'"),
        (("set", "x" * 256, "1"), "concurrency_key must be a non-empty string"),
        (("set", "", "1"), "concurrency_key must be a non-empty string"),
        (("clear", "a\x01" * 200), "concurrency_key must be a non-empty string"),
        (("set", "k"), "give a limit N, a --rate, or both"),
        (("set", "k", "--rate", "0"), "invalid rate '0'"),
        (("set", "k", "--rate", "-5/s"), "invalid rate '-5/s'"),
        (("set", "k", "--rate", "20/h"), "invalid rate '20/h'"),
        (("set", "k", "--rate", "fast"), "invalid rate 'fast'"),
        (("set", "k", "--rate", "200001/s"), "invalid rate '200001/s'"),
        (("set", "k", "--rate", "nan"), "invalid rate 'nan'"),
        (("set", "k", "--rate", "5", "--burst", "0"), "invalid burst 0"),
        (("set", "k", "--rate", "5", "--burst", "many"), "invalid burst 'many'"),
        (("set", "k", "3", "--burst", "5"), "--burst needs --rate"),
        (("set", "k", "-1", "--rate", "5"), "invalid limit '-1'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_connecting(
    args: tuple[str, ...], message: str
) -> None:
    # An unreachable DSN: the refusal must come before any connection attempt.
    result = queue_ctl("--dsn", "host=/nonexistent dbname=x", "limits", *args)
    assert result.returncode == 2, result
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_operations_round_trip(conn: psycopg.Connection[Any]) -> None:
    first = set_limit(conn, S, "k", 2)
    assert (first.previous, first.max_running, first.running) == (None, 2, 0)
    assert set_limit(conn, S, "k", "5").previous == 2
    assert [(r.key, r.max_running) for r in list_limits(conn, S)] == [("k", 5)]
    assert clear_limit(conn, S, "k") == 5
    assert clear_limit(conn, S, "k") is None
    with pytest.raises(ValidationError):
        parse_limit(True)


def test_enqueue_takes_the_concurrency_options(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """``queue-ctl enqueue --concurrency-key K --concurrency-limit N``; a bad limit: one line."""
    job_id = int(
        ok(
            queue_ctl(
                "--dsn",
                dsn,
                "enqueue",
                "t",
                "--concurrency-key",
                "src:erp",
                "--concurrency-limit",
                "3",
            )
        ).strip()
    )
    row = conn.execute(
        "SELECT concurrency_key, concurrency_limit FROM queue_engine.jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row == ("src:erp", 3)
    bad = queue_ctl("--dsn", dsn, "enqueue", "t", "--concurrency-limit", "2")
    assert bad.returncode == 2, bad
    assert "concurrency_limit needs a concurrency_key" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone() == (1,)


def rate_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT key, rate, burst, round(tokens::numeric, 1)::float8"
        " FROM queue_engine.rate_buckets ORDER BY key"
    ).fetchall()


def test_rates_set_list_clear_as_an_operator_runs_them(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    out = ok(queue_ctl("--dsn", dsn, "limits", "set", "partner:acme", "--rate", "20/s"))
    assert out.strip() == "key partner:acme rated 20/s, burst 20 (was: none)"
    assert rate_rows(conn) == [("partner:acme", 20.0, 20, 20.0)]  # a new bucket starts full
    out = ok(
        queue_ctl(
            "--dsn", dsn, "limits", "set", "partner:acme", "--rate", "600/min", "--burst", "5"
        )
    )
    assert out.strip() == "key partner:acme rated 10/s, burst 5 (was: 20/s, burst 20)"
    assert rate_rows(conn) == [("partner:acme", 10.0, 5, 5.0)]  # capped at the new burst
    # A limit and a rate at once; a rate slower than one a second shows per minute.
    out = ok(queue_ctl("--dsn", dsn, "limits", "set", "slow", "2", "--rate", "30/min"))
    assert out.splitlines() == [
        "key slow limited to 2 running (was: none; running now: 0)",
        "key slow rated 30/min, burst 1 (was: none)",
    ]
    listed = ok(queue_ctl("--dsn", dsn, "limits", "list")).splitlines()
    assert [line.split()[:7] for line in listed[1:]] == [
        ["partner:acme", "-", "0", "0", "10/s", "5", "5.0"],
        ["slow", "2", "0", "0", "30/min", "1", "1.0"],
    ]
    as_json = json.loads(ok(queue_ctl("--dsn", dsn, "limits", "list", "--json")))
    assert [(r["key"], r["max_running"], r["rate"], r["burst"]) for r in as_json] == [
        ("partner:acme", None, 10.0, 5),
        ("slow", 2, 0.5, 1),
    ]
    out = ok(queue_ctl("--dsn", dsn, "limits", "clear", "slow", "--rate-only"))
    assert out.strip() == "key slow rate 30/min, burst 1 removed"
    assert limits_rows(conn) == [("slow", 2)]
    out = ok(queue_ctl("--dsn", dsn, "limits", "clear", "slow", "--rate-only"))
    assert out.strip() == "key slow had no rate set (unchanged)"
    out = ok(queue_ctl("--dsn", dsn, "limits", "clear", "partner:acme"))
    assert out.splitlines() == [
        "key partner:acme had no limit set (unchanged)",
        "key partner:acme rate 10/s, burst 5 removed",
    ]
    assert rate_rows(conn) == []


def test_changing_a_rate_keeps_the_tokens_earned(conn: psycopg.Connection[Any]) -> None:
    set_rate(conn, S, "k", "1/s", 100)
    conn.execute(
        "UPDATE queue_engine.rate_buckets SET tokens = 0,"
        " refilled_at = clock_timestamp() - interval '30 s'"
    )
    # 30 s at the old rate earned 30 tokens; the new rate counts from now.
    changed = set_rate(conn, S, "k", "1000/min", 100)
    assert (changed.previous_rate, changed.previous_burst) == (1.0, 100)
    (row,) = list_limits(conn, S)
    assert row.rate == pytest.approx(1000 / 60)
    assert row.tokens is not None and 30 <= row.tokens < 31


def test_the_rate_operations_round_trip(conn: psycopg.Connection[Any]) -> None:
    assert set_rate(conn, S, "k", 2.5, None).burst == 3  # one second's worth, rounded up
    assert clear_rate(conn, S, "k") == (2.5, 3)
    assert clear_rate(conn, S, "k") is None
    assert parse_key_rate("120/min") == 2.0
    assert parse_key_rate(" 7 / s ") == 7.0
    for bad in (True, "inf", "1e9", "/s", ""):
        with pytest.raises(ValidationError):
            parse_key_rate(bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        parse_burst(True)
