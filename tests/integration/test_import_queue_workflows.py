"""``queue-ctl import --from queue_workflows``: ingest jobs and half-done DAGs continue here.

The source is a second database of the test server with queue_workflows'
tables as assumed from its notes (tests/fixtures/legacy/queue_workflows.sql):
ingest jobs in every status and workflow runs queued, half done, waiting for
an input, finished and failed.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from support.legacy import checksum, create_legacy_schema

from queue_engine import Client
from queue_engine.operator.importing.run import run_import
from queue_engine.producer.context import JobContext
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain

#: Runs: (status, [(node, module, queue, depends_on, status, attempts, result)]).
RUNS: list[tuple[str, list[tuple[Any, ...]]]] = [
    (  # 1: half done: a and e (after a) completed, d skipped, b running, c pending
        "running",
        [
            ("a", "nodes.a", "cpu", [], "completed", 1, {"x": 1}),
            ("d", "nodes.d", "cpu", [], "skipped", 0, None),
            ("b", "nodes.b", "gpu", ["a"], "running", 1, None),
            ("c", "nodes.c", "cpu", ["b", "d", "e"], "pending", 0, None),
            ("e", "nodes.e", "cpu", ["a"], "completed", 2, {"z": 5}),
        ],
    ),
    ("queued", [("a", "nodes.a", "cpu", [], "queued", 0, None)]),  # 2: not started
    ("completed", [("a", "nodes.a", "cpu", [], "completed", 1, {"x": 2})]),  # 3: finished
    (  # 4: a node failed: ends failed there, not moved
        "running",
        [
            ("a", "nodes.a", "cpu", [], "failed", 3, None),
            ("b", "nodes.b", "gpu", ["a"], "pending", 0, None),
        ],
    ),
    ("running", [("ask", "nodes.ask", "cpu", [], "awaiting_input", 0, None)]),  # 5
    ("cancelled", [("a", "nodes.a", "cpu", [], "cancelled", 0, None)]),  # 6
]

#: Ingest jobs: (task_name, queue, status, attempts).
INGEST = [
    ("fetch.prices", "fetch", "queued", 0),
    ("fetch.prices", "fetch", "running", 1),
    ("load.prices", "load", "completed", 1),
    ("load.prices", "load", "failed", 3),
    ("load.prices", "load", "cancelled", 0),
]


@pytest.fixture
def source(empty_dsn: str) -> str:
    create_legacy_schema(empty_dsn, "queue_workflows")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        for n, (task, queue, status, attempts) in enumerate(INGEST, 1):
            conn.execute(
                "INSERT INTO ingest_jobs (task_name, queue, args, status, attempts)"
                " VALUES (%s, %s, %s, %s, %s)",
                (task, queue, json.dumps({"n": n}), status, attempts),
            )
        for status, nodes in RUNS:
            row = conn.execute(
                "INSERT INTO workflow_runs (workflow_name, status) VALUES ('leads', %s)"
                " RETURNING id",
                (status,),
            ).fetchone()
            assert row is not None
            for name, module, queue, deps, node_status, attempts, result in nodes:
                conn.execute(
                    "INSERT INTO workflow_node_jobs (run_id, node_name, node_module, queue,"
                    " depends_on, inputs, status, attempts, context_delta, required_model)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        row[0],
                        name,
                        module,
                        queue,
                        deps,
                        json.dumps({"node": name}),
                        node_status,
                        attempts,
                        json.dumps(result) if result is not None else None,
                        "qwen-7b" if queue == "gpu" else None,
                    ),
                )
    return empty_dsn


def _mapped(conn: psycopg.Connection[Any], kind: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT old_id, new_id FROM queue_engine.imported_ids"
        " WHERE source = 'queue_workflows' AND kind = %s",
        (kind,),
    ).fetchall()
    return {str(old): int(new) for old, new in rows}


def _nodes(conn: psycopg.Connection[Any], workflow_id: int) -> dict[str, tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT node, status, task, attempt, result FROM queue_engine.jobs WHERE workflow_id = %s",
        (workflow_id,),
    ).fetchall()
    return {str(r[0]): tuple(r[1:]) for r in rows}


def test_unfinished_runs_and_ingest_jobs_arrive_once(source: str, dsn: str) -> None:
    before = checksum(source)
    with psycopg.connect(dsn, autocommit=True) as conn:
        dry = run_import(conn, "queue_engine", "queue_workflows", source, dry_run=True)
        assert not _mapped(conn, "job") and not _mapped(conn, "workflow")
        assert dry.outcomes[("workflow", "running", "imported")] == 2
        assert dry.outcomes[("workflow", "queued", "imported")] == 1

        report = run_import(conn, "queue_engine", "queue_workflows", source, batch_size=2)
        jobs, runs = _mapped(conn, "job"), _mapped(conn, "workflow")
        assert sorted(jobs) == ["1", "2"]  # queued and running ingest jobs only
        assert sorted(runs) == ["1", "2", "5"]  # not the finished, failed or cancelled
        assert [r.old_id for r in report.refusals] == ["4"]
        ingest = conn.execute(
            "SELECT queue, task, status, attempt, args FROM queue_engine.jobs WHERE id = %s",
            (jobs["2"],),
        ).fetchone()
        assert ingest == ("fetch", "fetch.prices", "queued", 1, {"n": 2})

        half = _nodes(conn, runs["1"])
        assert half["a"] == ("succeeded", "queue-engine:input", 0, {"x": 1})
        assert half["d"] == ("succeeded", "queue-engine:input", 0, None)
        assert half["e"] == ("succeeded", "queue-engine:input", 0, {"z": 5})
        assert half["b"][:3] == ("queued", "nodes.b", 1)  # running there: attempt spent
        affinity = conn.execute(
            "SELECT affinity_key FROM queue_engine.jobs WHERE workflow_id = %s AND node = 'b'",
            (runs["1"],),
        ).fetchone()
        assert affinity == ("qwen-7b",)  # its required_model
        assert half["c"][:3] == ("waiting", "nodes.c", 0)
        assert _nodes(conn, runs["2"])["a"][:2] == ("queued", "nodes.a")
        assert _nodes(conn, runs["5"])["ask"][:2] == ("waiting", "queue-engine:input")

        again = run_import(conn, "queue_engine", "queue_workflows", source)
        assert _mapped(conn, "workflow") == runs and _mapped(conn, "job") == jobs
        assert again.outcomes[("workflow", "running", "already imported")] == 2
        count = conn.execute("SELECT count(*) FROM queue_engine.workflows").fetchone()
        assert count is not None and count[0] == 3
    assert checksum(source) == before


def test_a_half_done_dag_finishes_here(source: str, dsn: str) -> None:
    seen: dict[str, Any] = {}

    def node_b(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
        seen["b"] = ctx.parents["a"].result  # a finished there: its result is here
        return {"y": seen["b"]["x"] + 1}

    def node_c(args: dict[str, Any], ctx: JobContext) -> int:
        seen["c"] = {name: p.result for name, p in ctx.parents.items()}
        return 3

    tasks = TaskRegistry()
    tasks.register(TaskDefinition("nodes.b", node_b, queue="gpu", wants_context=True))
    tasks.register(TaskDefinition("nodes.c", node_c, queue="cpu", wants_context=True))
    tasks.register(TaskDefinition("nodes.a", lambda args: None, queue="cpu"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        run_import(conn, "queue_engine", "queue_workflows", source)
        workflow_id = _mapped(conn, "workflow")["1"]
    drain(dsn, queue="gpu", tasks=tasks)
    drain(dsn, queue="cpu", tasks=tasks)
    assert seen == {"b": {"x": 1}, "c": {"b": {"y": 2}, "d": None, "e": {"z": 5}}}
    with Client(dsn) as client:
        assert client.get_workflow(workflow_id).state == "succeeded"
