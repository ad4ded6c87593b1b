"""The testing kit's time control against a real Postgres: no test here sleeps.

``sync_schedules`` + ``tick`` run the production ticker at a TestClock's
instant (the slot rules, exactly once, missed slots past the grace), and
``drain(at=clock)`` runs the delayed jobs (``delay``, retry backoffs) due by
the clock's instant and leaves the later ones queued.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from queue_engine import Client
from queue_engine.producer.retry import FixedBackoff
from queue_engine.producer.schedules import ScheduleSpec
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import (
    TestClock,
    assert_enqueued,
    drain,
    enqueued_jobs,
    sync_schedules,
    tick,
)

Q = "timed"
SIX = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
DAILY = ScheduleSpec(name="daily-report", expression="0 6 * * *", task="report.daily", queue=Q)


def _slots(result: Any) -> list[datetime]:
    return [fired.slot for fired in result.enqueued]


def test_tick_enqueues_each_slot_once_as_the_clock_moves(client: Client) -> None:
    clock = TestClock(SIX - timedelta(minutes=1))
    created = sync_schedules(client, [DAILY], start=clock)
    assert created.created == ["daily-report"]

    assert _slots(tick(client, clock)) == []  # 05:59: nothing due yet
    clock.advance(minutes=1)
    first = tick(client, clock)
    assert _slots(first) == [SIX]
    assert first.next_wake == SIX + timedelta(days=1)
    assert _slots(tick(client, clock)) == []  # the same instant again: exactly once

    job = assert_enqueued(client, task="report.daily", queue=Q)
    assert job.args["_schedule"] == {
        "schedule": "daily-report",
        "slot": SIX.isoformat(),
        "reason": "schedule",
    }
    clock.advance(days=1)
    assert _slots(tick(client, clock)) == [SIX + timedelta(days=1)]
    assert len(enqueued_jobs(client, task="report.daily")) == 2


def test_tick_applies_the_production_rules_to_missed_slots(client: Client) -> None:
    clock = TestClock(SIX - timedelta(minutes=1))
    sync_schedules(client, [DAILY], start=clock)
    clock.advance(days=3, minutes=1)  # slots of the 23rd, 24th and 25th are past the grace
    result = tick(client, clock)
    assert _slots(result) == [SIX + timedelta(days=3)]
    assert result.missed == {"daily-report": 3}


def test_tick_catches_up_when_the_schedule_asks(client: Client) -> None:
    spec = ScheduleSpec(
        name="catching-up", expression="0 6 * * *", task="report.daily", queue=Q, catchup=2
    )
    clock = TestClock(SIX - timedelta(minutes=1))
    sync_schedules(client, [spec], start=clock)
    clock.advance(days=3)  # 05:59 on the 26th: the slots of the 23rd to the 25th are missed
    result = tick(client, clock, grace_s=60)
    assert _slots(result) == [SIX + timedelta(days=1), SIX + timedelta(days=2)]
    assert result.missed == {"catching-up": 1}


def _registry(*definitions: TaskDefinition) -> TaskRegistry:
    registry = TaskRegistry()
    for definition in definitions:
        registry.register(definition)
    return registry


def test_drain_at_runs_only_the_jobs_due_by_the_clock(client: Client) -> None:
    tasks = _registry(TaskDefinition("echo", lambda args: args["n"], queue=Q))
    clock = TestClock()
    now = client.enqueue("echo", queue=Q, args={"n": 0})
    in_an_hour = client.enqueue("echo", queue=Q, args={"n": 1}, delay=3600)
    in_two = client.enqueue("echo", queue=Q, args={"n": 2}, delay=7200)

    assert [o.job_id for o in drain(client, queue=Q, tasks=tasks, at=clock)] == [now.id]
    clock.advance(hours=1, minutes=1)
    assert [o.job_id for o in drain(client, queue=Q, tasks=tasks, at=clock)] == [in_an_hour.id]
    assert client.get(in_two.id).status == "queued"
    clock.advance(hours=1)
    assert [o.result for o in drain(client, queue=Q, tasks=tasks, at=clock)] == [2]


def test_drain_at_moves_a_retry_through_its_backoff(client: Client) -> None:
    attempts: list[int] = []

    def flaky(args: dict[str, Any], ctx: Any) -> str:
        attempts.append(ctx.job.attempt)
        if len(attempts) == 1:
            raise RuntimeError("upstream down")
        return "loaded"

    tasks = _registry(
        TaskDefinition("flaky", flaky, queue=Q, retry=FixedBackoff(600), wants_context=True)
    )
    clock = TestClock()
    job = client.enqueue("flaky", queue=Q, max_attempts=3)
    assert [o.status for o in drain(client, queue=Q, tasks=tasks, at=clock)] == ["queued"]
    clock.advance(minutes=5)  # half the backoff: still waiting
    assert drain(client, queue=Q, tasks=tasks, at=clock) == []
    clock.advance(minutes=6)
    [outcome] = drain(client, queue=Q, tasks=tasks, at=clock)
    assert (outcome.attempt, outcome.status, outcome.result) == (2, "succeeded", "loaded")
    assert client.get(job.id).status == "succeeded"


def test_drain_refuses_run_delayed_and_at_together(client: Client) -> None:
    with pytest.raises(ValueError, match="run_delayed"):
        drain(client, queue=Q, run_delayed=True, at=TestClock())
