"""``queue-ctl partitions weight / list``, against a real Postgres, as an operator runs them.

The weights' effect on the claim is ``test_fair_share_claim.py``'s; here: the
rows each command writes, its output, that a weight applies to jobs enqueued
after it (queued jobs keep their turns), and the refusals (bad queue, key or
weight: exit 2, one line, before connecting, nothing written).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from support.ctl import ok, queue_ctl

from queue_engine.foundation.errors import ValidationError
from queue_engine.operator import partitions as parts

S = "queue_engine"
Conn = psycopg.Connection[Any]


def weights(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT queue, partition_key, weight FROM queue_engine.partition_weights"
        " ORDER BY queue, partition_key"
    ).fetchall()


def add(conn: Conn, n: int, queue: str, partition: str) -> None:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, priority, max_attempts, partition_key)"
        " SELECT %s, 't', 100, 5, %s FROM generate_series(1, %s)",
        (queue, partition, n),
    )


def tags(conn: Conn, partition: str) -> list[float]:
    rows = conn.execute(
        "SELECT fair_tag FROM queue_engine.jobs WHERE partition_key = %s ORDER BY id",
        (partition,),
    ).fetchall()
    return [r[0] for r in rows]


def test_weight_and_list_as_an_operator_runs_them(dsn: str, conn: Conn) -> None:
    add(conn, 3, "mail", "acme")
    add(conn, 1, "mail", "tiny")
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, claimed_by, started_at,"
        " lease_expires_at, partition_key) VALUES ('mail', 't', 'running', 1, 'w', now(),"
        " now() + interval '1 minute', 'tiny')"
    )
    out = ok(queue_ctl("--dsn", dsn, "partitions", "weight", "mail", "acme", "2"))
    assert out.strip() == (
        "partition acme of queue mail: weight 2 (was: 1 (default)); applies to jobs enqueued"
        " from now on, its 3 queued jobs keep their turns"
    )
    assert weights(conn) == [("mail", "acme", 2.0)]
    # Queued jobs keep their turns; the next ones are half a turn apart.
    add(conn, 2, "mail", "acme")
    assert tags(conn, "acme") == [0.0, 1.0, 2.0, 2.5, 3.0]
    ok(queue_ctl("--dsn", dsn, "partitions", "weight", "mail", "gold", "0.5"))
    listed = ok(queue_ctl("--dsn", dsn, "partitions", "list", "mail")).splitlines()
    assert [line.split() for line in listed] == [
        ["PARTITION", "QUEUED", "RUNNING", "WEIGHT"],
        ["acme", "5", "0", "2"],
        ["tiny", "1", "1", "1", "(default)"],
        ["gold", "0", "0", "0.5"],
    ]
    as_json = json.loads(ok(queue_ctl("--dsn", dsn, "partitions", "list", "mail", "--json")))
    assert as_json["more"] is False
    assert [(p["partition_key"], p["queued"], p["weight"]) for p in as_json["partitions"]] == [
        ("acme", 5, 2.0),
        ("tiny", 1, 1.0),
        ("gold", 0, 0.5),
    ]
    out = ok(queue_ctl("--dsn", dsn, "partitions", "weight", "mail", "acme", "--clear"))
    assert out.strip() == (
        "partition acme of queue mail: weight 2 removed (now 1); applies to jobs enqueued"
        " from now on"
    )
    out = ok(queue_ctl("--dsn", dsn, "partitions", "weight", "mail", "acme", "--clear"))
    assert out.strip() == "partition acme of queue mail had no weight set (unchanged: 1)"
    assert weights(conn) == [("mail", "gold", 0.5)]
    out = ok(queue_ctl("--dsn", dsn, "partitions", "list", "empty"))
    assert "queue empty has no partitioned jobs" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("weight", "q", "k", "0"), "invalid weight '0'"),
        (("weight", "q", "k", "-1"), "invalid weight '-1'"),
        (("weight", "q", "k", "1001"), "invalid weight '1001'"),
        (("weight", "q", "k", "nan"), "invalid weight 'nan'"),
        (("weight", "q", "k", "two"), "invalid weight 'two'"),
        (("weight", "q", "k"), "give a weight W, or --clear"),
        (("weight", "q", "k", "2", "--clear"), "give a weight W, or --clear"),
        (("weight", "bad queue", "k", "2"), "invalid queue name 'bad queue'"),
        (("weight", "q", "x" * 256, "2"), "partition_key must be a non-empty string"),
        (("weight", "q", "", "2"), "partition_key must be a non-empty string"),
        (("list", "bad queue"), "invalid queue name 'bad queue'"),
        (("list", "q", "--limit", "0"), "invalid --limit 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_connecting(
    args: tuple[str, ...], message: str
) -> None:
    # An unreachable DSN: the refusal must come before any connection attempt.
    result = queue_ctl("--dsn", "host=/nonexistent dbname=x", "partitions", *args)
    assert result.returncode == 2, result
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_list_counts_up_to_the_cap_through_the_index(
    conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parts, "DEPTH_CAP", 4)
    monkeypatch.setattr(parts, "SCAN_MAX", 2)
    add(conn, 6, "q", "a")
    add(conn, 2, "q", "b")
    add(conn, 3, "q", "c")
    found = parts.list_partitions(conn, S, "q")
    # The first two partitions by key were visited; a's count stopped at the cap.
    assert [(p.partition_key, p.queued, p.capped) for p in found.rows] == [
        ("a", 4, True),
        ("b", 2, False),
    ]
    assert found.more
    with pytest.raises(ValidationError):
        parts.list_partitions(conn, S, "q", limit=0)
    with pytest.raises(ValidationError):
        parts.parse_weight(True)
