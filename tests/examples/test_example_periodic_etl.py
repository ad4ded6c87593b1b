"""examples/periodic_etl: schedule -> fetch -> load, under a test clock; one load per date.

Time is the test's (``TestClock``, ``sync_schedules``, ``tick``): the daily
06:30 Moscow slot fires when the clock passes it, never by waiting.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from queue_engine import Client
from queue_engine.testing import (
    DrainError,
    TestClock,
    assert_enqueued,
    drain,
    enqueued_jobs,
    sync_schedules,
    tick,
)

#: 06:29 in Moscow (UTC+3): a minute before the daily slot.
BEFORE_SLOT = datetime(2026, 11, 23, 3, 29, tzinfo=UTC)


@pytest.fixture
def etl(load_example: Any) -> ModuleType:
    return load_example("periodic_etl", "cbr_etl")


def _rates(conn: Any, day: str) -> dict[str, float]:
    rows = conn.execute(
        "SELECT currency, rate::float8 FROM cbr_rates WHERE day = %s", (day,)
    ).fetchall()
    return dict(rows)


def test_the_daily_slot_fetches_then_loads_that_day(
    etl: ModuleType, client: Client, conn: Any
) -> None:
    clock = TestClock(BEFORE_SLOT)
    assert sync_schedules(client, start=clock).created == ["cbr-daily"]
    assert tick(client, clock).enqueued == []
    clock.advance(minutes=1)
    [fired] = tick(client, clock).enqueued
    assert fired.slot == BEFORE_SLOT + timedelta(minutes=1)
    assert_enqueued(client, task="cbr.fetch", queue="load.cbr")

    fetched, loaded = drain(client, queue="load.cbr")

    assert (fetched.task, fetched.status) == ("cbr.fetch", "succeeded")
    assert fetched.result["date"] == "2026-11-23" and fetched.result["new_load"] is True
    assert (loaded.task, loaded.status) == ("cbr.load", "succeeded")
    assert loaded.result == {"date": "2026-11-23", "rows": 3, "lock_key": "cbr.rates"}
    assert _rates(conn, "2026-11-23") == etl.fetch_rates(date(2026, 11, 23))

    # The next day's slot loads the next day.
    clock.advance(days=1)
    assert len(tick(client, clock).enqueued) == 1
    assert [o.result.get("date") for o in drain(client, queue="load.cbr")] == ["2026-11-24"] * 2


def test_the_day_comes_from_the_date_the_slot_or_today(etl: ModuleType) -> None:
    assert etl.day_of({"date": "2026-11-20"}) == date(2026, 11, 20)
    # 22:30 UTC on the 22nd is already the 23rd in Moscow.
    slot = {"_schedule": {"slot": "2026-11-22T22:30:00+00:00", "reason": "schedule"}}
    assert etl.day_of(slot) == date(2026, 11, 23)
    manual = {"_schedule": {"schedule": "cbr-daily", "slot": None, "reason": "manual"}}
    assert etl.day_of(manual) == datetime.now(etl.BANK_TZ).date()


def test_a_second_enqueue_for_the_same_date_is_the_same_job(
    etl: ModuleType, client: Client
) -> None:
    day = date(2026, 11, 23)
    first = etl.enqueue_load(client, day, etl.fetch_rates(day))
    again = etl.enqueue_load(client, day, etl.fetch_rates(day))
    other = etl.enqueue_load(client, day + timedelta(days=1), etl.fetch_rates(day))
    assert (again.id, again.created) == (first.id, False)
    assert first.created and other.id != first.id
    assert first.lock_key == other.lock_key == "cbr.rates"
    assert first.idempotency_key == "cbr.load:2026-11-23"


def test_a_fetch_run_twice_loads_the_day_once(etl: ModuleType, client: Client, conn: Any) -> None:
    """A re-run (or a backfill overlapping the schedule) gets the existing load back."""
    for _ in range(2):
        client.enqueue("cbr.fetch", queue="load.cbr", args={"date": "2026-11-20"})
    outcomes = drain(client, queue="load.cbr")
    fetches = [o for o in outcomes if o.task == "cbr.fetch"]
    assert [o.result["new_load"] for o in fetches] == [True, False]
    assert len({o.result["load_job"] for o in fetches}) == 1
    [load] = enqueued_jobs(client, task="cbr.load", status=None)
    assert (load.status, load.lock_key) == ("succeeded", "cbr.rates")
    assert len(_rates(conn, "2026-11-20")) == 3


def test_the_load_runs_under_its_lock_key(etl: ModuleType, client: Client, conn: Any) -> None:
    """While another job holds cbr.rates, a load waits; once it is released, the load runs."""
    holder = client.enqueue("hold", queue="elsewhere", lock_key="cbr.rates")
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'test',"
        " started_at = now(), lease_expires_at = now() + interval '1 hour' WHERE id = %s",
        (holder.id,),
    )
    day = date(2026, 11, 21)
    load = etl.enqueue_load(client, day, etl.fetch_rates(day))
    with pytest.raises(DrainError, match="not drained"):  # due, but no worker may take it
        drain(client, queue="load.cbr", timeout_s=2)
    assert client.get(load.id).status == "queued"
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'succeeded', finished_at = now() WHERE id = %s",
        (holder.id,),
    )
    [outcome] = drain(client, queue="load.cbr")
    assert outcome.status == "succeeded" and outcome.result["lock_key"] == "cbr.rates"
