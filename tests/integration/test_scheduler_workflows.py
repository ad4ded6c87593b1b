"""Contract: a schedule can start a workflow, exactly once per slot, on real Postgres.

``@periodic(expr, workflow=factory)`` declares a code schedule whose slots call
``factory(slot)`` and start its workflow (idempotency key
``schedule:<name>:<slot>``, ``schedule`` set) in the transaction that claims
the slot, as the single-job path does: schedulers racing one slot start one
workflow; missed slots with catchup start one each; ``overlap="skip"`` skips
while the previous workflow runs; a factory that raises settles nothing; a
scheduler whose app lacks the factory leaves the schedule alone; the command
line cannot add or run such a schedule.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from support.scheduler import make_ticker

from queue_engine import Client, Workflow
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.schedules import WORKFLOW_TASK, ScheduleSpec, periodic, schedule_registry
from queue_engine.scheduler import store
from queue_engine.scheduler.ticker import Ticker

__all__ = ["make_ticker"]  # a fixture: imported so that pytest finds it here

SCHEMA = "queue_engine"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
Conn = psycopg.Connection[Any]
built: list[datetime] = []


def build_report(slot: datetime) -> Workflow:
    """The workflow factory under test: fetch → (a, b) → publish, named by the slot."""
    built.append(slot)
    wf = Workflow("report", idempotency_key="ignored-by-the-scheduler")
    wf.add("fetch", "report.fetch", queue="wfs", args={"slot": slot.isoformat()})
    wf.add("a", "report.part", queue="wfs", after=["fetch"])
    wf.add("b", "report.part", queue="wfs", after=["fetch"])
    wf.add("publish", "report.publish", queue="wfs", after=["a", "b"])
    return wf


def broken_factory(slot: datetime) -> Workflow:
    raise RuntimeError("upstream config missing")


@pytest.fixture(autouse=True)
def _factories() -> Iterator[None]:
    built.clear()
    yield
    schedule_registry.clear()


def declare(conn: Conn, name: str, expression: str, factory: Any = build_report, **kw: Any) -> None:
    """Declare a workflow schedule in code, sync it, start its cursor at T0."""
    periodic(expression, name=name, workflow=factory, **kw)
    assert schedule_registry.get(name) is not None
    store.sync_code(conn, SCHEMA, schedule_registry.specs(), app="tests.app")
    conn.execute("UPDATE queue_engine.schedules SET checked_until = %s WHERE name = %s", (T0, name))


def workflows_of(conn: Conn, name: str) -> list[tuple[int, str, int]]:
    """(id, idempotency_key, node count) of the workflows a schedule started, oldest first."""
    rows = conn.execute(
        "SELECT w.id, w.idempotency_key, (SELECT count(*) FROM queue_engine.jobs j "
        "WHERE j.workflow_id = w.id) FROM queue_engine.workflows w "
        "WHERE w.schedule = %s ORDER BY w.id",
        (name,),
    ).fetchall()
    return [(int(r[0]), str(r[1]), int(r[2])) for r in rows]


def key(name: str, slot: datetime) -> str:
    return f"schedule:{name}:{slot.isoformat()}"


def test_a_slot_starts_its_workflow_in_the_slots_transaction(
    conn: Conn, client: Client, make_ticker: Callable[..., Ticker]
) -> None:
    declare(conn, "report", "every 10s")
    row = next(r for r in store.list_rows(conn, SCHEMA)[0] if r.name == "report")
    assert (row.spec.task, row.spec.workflow) == (
        WORKFLOW_TASK,
        f"{__name__}:build_report",
    )
    result = make_ticker().run_once(T0 + timedelta(seconds=10, milliseconds=5))
    slot = T0 + timedelta(seconds=10)
    assert built == [slot]
    [(workflow_id, idem, nodes)] = workflows_of(conn, "report")
    assert (idem, nodes) == (key("report", slot), 4)
    assert [(f.schedule, f.slot, f.job_id, f.workflow_id) for f in result.enqueued] == [
        ("report", slot, None, workflow_id)
    ]
    assert conn.execute(
        "SELECT outcome, job_id, workflow_id FROM queue_engine.schedule_runs "
        "WHERE schedule = 'report'"
    ).fetchall() == [("enqueued", None, workflow_id)]
    assert conn.execute(
        "SELECT last_workflow_id, last_slot FROM queue_engine.schedules WHERE name = 'report'"
    ).fetchone() == (workflow_id, slot)
    info = client.get_workflow(workflow_id)
    assert (info.schedule, info.producer, info.state) == ("report", "queue-scheduler", "running")
    # No job of its own: the schedule's slot is the workflow.
    assert conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE workflow_id IS NULL"
    ).fetchone() == (0,)


def test_schedulers_racing_one_slot_start_one_workflow(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    declare(conn, "race", "every 1s")
    tickers = [make_ticker(f"ticker-{c}") for c in "abc"]
    rounds = 15
    barrier = threading.Barrier(len(tickers))
    errors: list[BaseException] = []
    started: list[int] = []

    def race(ticker: Ticker) -> None:
        try:
            for k in range(1, rounds + 1):
                barrier.wait()
                result = ticker.run_once(T0 + timedelta(seconds=k))
                started.extend(f.workflow_id for f in result.enqueued if f.workflow_id)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=race, args=(t,)) for t in tickers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    keys = [k for _, k, _ in workflows_of(conn, "race")]
    assert keys == [key("race", T0 + timedelta(seconds=k)) for k in range(1, rounds + 1)]
    assert sorted(started) == [i for i, _, _ in workflows_of(conn, "race")]
    # The factory ran once per slot: losers of a slot never built its workflow.
    assert len(built) == rounds


def test_missed_slots_with_catchup_start_one_workflow_each(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    declare(conn, "five", "*/5 * * * *", catchup=3)
    result = make_ticker(grace_s=60).run_once(T0 + timedelta(hours=1, seconds=2))
    slots = [T0 + timedelta(minutes=m) for m in (45, 50, 55, 60)]
    assert [f.slot for f in result.enqueued] == slots
    assert [k for _, k, _ in workflows_of(conn, "five")] == [key("five", s) for s in slots]
    assert result.missed == {"five": 8}  # 12:05 to 12:40
    # Run again at the same instant: nothing more.
    assert make_ticker("other").run_once(T0 + timedelta(hours=1, seconds=3)).enqueued == []
    assert len(workflows_of(conn, "five")) == 4


def test_overlap_skip_waits_for_the_previous_workflow(
    conn: Conn, client: Client, make_ticker: Callable[..., Ticker]
) -> None:
    declare(conn, "slow", "every 10s", overlap="skip")
    ticker = make_ticker()
    first = ticker.run_once(T0 + timedelta(seconds=10))
    [workflow_id] = [f.workflow_id for f in first.enqueued]
    assert workflow_id is not None
    second = ticker.run_once(T0 + timedelta(seconds=20))
    assert (second.enqueued, [f.slot for f in second.skipped]) == (
        [],
        [T0 + timedelta(seconds=20)],
    )
    client.cancel_workflow(workflow_id)
    third = ticker.run_once(T0 + timedelta(seconds=30))
    assert [f.slot for f in third.enqueued] == [T0 + timedelta(seconds=30)]


def test_a_factory_that_raises_settles_nothing_and_holds_up_no_other_schedule(
    conn: Conn, make_ticker: Callable[..., Ticker], caplog: pytest.LogCaptureFixture
) -> None:
    declare(conn, "broken", "every 10s", factory=broken_factory)
    declare(conn, "fine", "every 10s")
    with caplog.at_level(logging.ERROR, logger="queue_engine.scheduler"):
        result = make_ticker().run_once(T0 + timedelta(seconds=10))
    assert result.failed == ["broken"]
    assert [f.schedule for f in result.enqueued] == ["fine"]
    assert "upstream config missing" in caplog.text
    assert conn.execute(
        "SELECT count(*) FROM queue_engine.schedule_runs WHERE schedule = 'broken'"
    ).fetchone() == (0,)
    assert conn.execute(
        "SELECT checked_until FROM queue_engine.schedules WHERE name = 'broken'"
    ).fetchone() == (T0,)


def test_a_scheduler_without_the_factory_leaves_the_schedule_alone(
    conn: Conn, make_ticker: Callable[..., Ticker], caplog: pytest.LogCaptureFixture
) -> None:
    declare(conn, "elsewhere", "every 10s")
    ticker = make_ticker(factories=lambda spec: None)
    with caplog.at_level(logging.WARNING, logger="queue_engine.scheduler"):
        result = ticker.run_once(T0 + timedelta(seconds=10))
        ticker.run_once(T0 + timedelta(seconds=11))
    assert (result.enqueued, result.failed, result.schedules) == ([], [], 0)
    assert caplog.text.count("scheduler.workflow_unavailable") == 1
    assert workflows_of(conn, "elsewhere") == []
    # The cursor did not move: the scheduler that has the factory still acts on the slot.
    later = make_ticker("with-app").run_once(T0 + timedelta(seconds=12))
    assert [f.slot for f in later.enqueued] == [T0 + timedelta(seconds=10)]


def test_the_command_line_cannot_add_or_run_a_workflow_schedule(conn: Conn) -> None:
    with pytest.raises(ValidationError, match="only code can build"):
        ScheduleSpec(
            name="cli-wf",
            expression="every 1m",
            task=WORKFLOW_TASK,
            workflow="app:build",
            source="cli",
        )
    with pytest.raises(ValidationError, match="reserved for schedules that start a workflow"):
        store.add(conn, SCHEMA, ScheduleSpec(name="x", expression="every 1m", task=WORKFLOW_TASK))
    with pytest.raises(ValidationError, match="do not apply to a workflow schedule"):
        periodic("every 1m", name="bad", workflow=build_report, queue="q")
    declare(conn, "nightly", "0 2 * * *")
    with pytest.raises(ValidationError, match="run-now` cannot build"):
        store.run_now(conn, SCHEMA, "nightly")
    # The table refuses it too, for SQL written by hand.
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE queue_engine.schedules SET source = 'cli' WHERE name = 'nightly'")
