"""Contract: the flow-control sections of ``queue-ctl stats`` and ``top`` (subprocess).

Under the queues: the busiest concurrency keys (running, limit, jobs waiting
on the limit, ``full`` / ``held``) and the deepest partitions; in
``stats --json`` the same figures; ``top`` keeps them within 80 columns.
"""

from __future__ import annotations

import json
from typing import Any

from support.ctl import ok, queue_ctl
from support.flow import EXPECTED_KEYS, PARTITION_QUEUE, PARTITIONS, build_scene


def section(lines: list[str], title: str) -> list[str]:
    """The table under ``title``: its header and rows, up to the next blank line."""
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def test_stats_shows_keys_and_partitions(dsn: str, conn: Any) -> None:
    build_scene(conn)
    lines = ok(queue_ctl("--dsn", dsn, "stats")).splitlines()
    keys = section(lines, "Concurrency keys (busiest first)")
    assert keys[0].split() == ["KEY", "RUNNING", "LIMIT", "WAITING", "STATE"]
    assert [row.split() for row in keys[1:]] == [
        ["src:erp", "3", "3", "5", "full"],
        ["api:partner", "2", "10", "0"],
        ["held:key", "0", "0", "2", "held"],
        ["report:daily", "1", "2", "(job)", "0"],
    ]
    parts = section(lines, "Partitions (deepest first)")
    assert parts[0].split() == ["QUEUE", "PARTITION", "QUEUED", "RUNNING"]
    assert [row.split() for row in parts[1:]] == [
        [PARTITION_QUEUE, k, str(q), str(r)] for k, (q, r) in PARTITIONS.items()
    ]


def test_stats_json_carries_the_same_figures(dsn: str, conn: Any) -> None:
    build_scene(conn)
    doc = json.loads(ok(queue_ctl("--dsn", dsn, "stats", "--json")))
    assert {
        k["key"]: (k["limit"], k["running"], k["waiting"]) for k in doc["concurrency_keys"]
    } == EXPECTED_KEYS
    assert [(p["partition_key"], p["queued"]) for p in doc["partitions"]] == [
        (k, q) for k, (q, _) in PARTITIONS.items()
    ]
    only_etl = json.loads(ok(queue_ctl("--dsn", dsn, "stats", "--json", "--queue", "etl")))
    assert only_etl["partitions"] == []  # partitions of the queue asked for only


def test_stats_without_keys_or_partitions_prints_no_section(dsn: str, conn: Any) -> None:
    conn.execute("INSERT INTO queue_engine.jobs (queue, task) VALUES ('plain', 't')")
    out = ok(queue_ctl("--dsn", dsn, "stats"))
    assert "Concurrency keys" not in out and "Partitions" not in out


def test_top_shows_keys_and_partitions_within_80_columns(dsn: str, conn: Any) -> None:
    build_scene(conn)
    conn.execute(
        "INSERT INTO queue_engine.concurrency_limits (key, max_running) VALUES (%s, 1)",
        ("tenant-with-a-very-long-name:" + "x" * 100,),
    )
    lines = ok(queue_ctl("--dsn", dsn, "top", env={"COLUMNS": "80"})).splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if line.startswith("KEY "))
    assert header.split() == ["KEY", "RUNNING", "LIMIT", "WAITING", "STATE"]
    assert any(line.split()[:4] == ["src:erp", "3", "3", "5"] for line in lines)
    assert any(line.split() == [PARTITION_QUEUE, "tenant-a", "40", "2"] for line in lines)
