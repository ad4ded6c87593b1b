"""The importer's pure rules: pqrun's priority, attempts, refusals, a run's node plan."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from queue_engine.operator.importing.convert import (
    ImportJob,
    Refusal,
    attempts_of,
    from_dataloader,
    from_pqrun,
    pqrun_priority,
    pqrun_priority_clamped,
)
from queue_engine.operator.importing.workflows import INPUT_TASK, WorkflowPlan, plan_run

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def test_pqrun_priority_keeps_the_order_and_maps_default_to_default() -> None:
    olds = list(range(-900, 101))
    news = [pqrun_priority(p) for p in olds]
    # Higher first there is lower first here: strictly, in the kept range.
    assert all(a > b for a, b in itertools.pairwise(news))
    assert pqrun_priority(0) == 100 and pqrun_priority(10) == 90 and pqrun_priority(-5) == 105
    assert pqrun_priority(100) == pqrun_priority(10**6) == 0
    assert pqrun_priority(-900) == pqrun_priority(-(10**6)) == 1000
    assert not pqrun_priority_clamped(100) and pqrun_priority_clamped(101)
    assert pqrun_priority_clamped(-901) and not pqrun_priority_clamped(-900)


@pytest.mark.parametrize(
    ("attempts", "limit", "expected"),
    [
        (0, 5, (0, 5)),
        (2, 5, (2, 5)),
        (5, 5, (5, 6)),  # its last attempt was running: one more run, as its reaper gives
        (7, 5, (7, 8)),
        (0, None, (0, None)),
        (5000, 5000, (999, 1000)),
    ],
)
def test_attempts_spent_are_kept_and_one_more_run_is_left(
    attempts: int, limit: int | None, expected: tuple[int, int | None]
) -> None:
    assert attempts_of(attempts, limit) == expected


def _pqrun(**changes: Any) -> dict[str, Any]:
    row = {
        "old_id": "7",
        "status": "READY",
        "task": "summarize",
        "args": {"conversation_id": 123},
        "priority": 10,
        "attempts": 0,
        "max_attempts": 5,
        "run_after": NOW,
        "timeout_seconds": None,
        "dedupe_key": "summarize:conv:123",
        "last_error": None,
        "created_at": NOW,
    }
    return {**row, **changes}


def test_a_pqrun_row_maps_to_a_job() -> None:
    job = from_pqrun(_pqrun(timeout_seconds=10**7))
    assert isinstance(job, ImportJob)
    assert (job.task, job.priority, job.dedupe_key, job.queue) == (
        "summarize",
        90,
        "summarize:conv:123",
        None,  # the task's default queue applies
    )
    assert job.args == '{"conversation_id":123}' and job.timeout_s == 604_800


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"task": "no spaces allowed"}, "task"),
        ({"args": [1, 2]}, "not an object"),
        ({"dedupe_key": "k" * 256}, "dedupe_key"),
    ],
)
def test_a_row_that_cannot_move_unchanged_is_refused(changes: dict[str, Any], reason: str) -> None:
    refused = from_pqrun(_pqrun(**changes))
    assert isinstance(refused, Refusal) and refused.old_id == "7" and reason in refused.reason


def test_a_dataloader_row_keeps_its_keys_and_drops_an_empty_partition() -> None:
    job = from_dataloader(
        {
            "old_id": "550e8400-e29b-41d4-a716-446655440000",
            "status": "running",
            "queue": "load.cbr",
            "task": "load.cbr.rates",
            "args": {},
            "idempotency_key": "cbr_2025-01-10",
            "lock_key": "cbr_rates",
            "partition_key": "",
            "priority": 5000,
            "available_at": NOW,
            "attempt": 1,
            "max_attempts": 3,
            "lease_ttl_sec": 300,
            "producer": "api-client",
            "error": None,
            "created_at": NOW,
        }
    )
    assert isinstance(job, ImportJob)
    assert (job.partition_key, job.priority, job.lease_ttl_s, job.attempt) == (None, 1000, 300, 1)


def _node(name: str, status: str, deps: list[str], result: Any = None) -> dict[str, Any]:
    return {
        "node": name,
        "task": f"nodes.{name}",
        "queue": "cpu",
        "depends_on": deps,
        "inputs": {},
        "status": status,
        "attempts": 1 if status == "running" else 0,
        "max_attempts": 3,
        "result": result,
        "error": None,
    }


def _run(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {"old_id": "1", "status": "running", "workflow_name": "leads", "nodes": list(nodes)}


def test_a_run_is_planned_parents_first_with_finished_nodes_provided() -> None:
    plan = plan_run(
        _run(
            _node("c", "pending", ["b"]),
            _node("b", "running", ["a"]),
            _node("a", "completed", [], {"x": 1}),
        )
    )
    assert isinstance(plan, WorkflowPlan)
    assert [n["node"] for n in plan.nodes] == ["a", "b", "c"]
    assert plan.nodes[0]["task"] == INPUT_TASK and plan.provided == [("a", '{"x": 1}')]
    assert plan.attempts == [("b", 1, None), ("c", 0, None)]


@pytest.mark.parametrize(
    ("nodes", "reason"),
    [
        ([_node("a", "pending", ["b"]), _node("b", "pending", ["a"])], "cycle"),
        ([_node("a", "pending", ["zz"])], "unknown nodes: zz"),
        ([_node("a", "failed", [])], "node a is failed"),
        ([], "no node-jobs"),
    ],
)
def test_a_run_that_cannot_continue_here_is_refused(
    nodes: list[dict[str, Any]], reason: str
) -> None:
    refused = plan_run(_run(*nodes))
    assert isinstance(refused, Refusal) and reason in refused.reason
