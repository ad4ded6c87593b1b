"""Contract: schedules declared in code (``@periodic``) or built for the CLI are validated at once.

``@periodic`` above or below ``@task`` takes the task's name and queue; a
registration call names the task; names default to the task name and must be
unique; every option is checked with a message naming the schedule and option;
``_schedule`` in args is reserved for the slot information; pure slot planning
(grace, catchup) is checked with a virtual clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from queue_engine import periodic, task
from queue_engine.daemon.service import Timing
from queue_engine.foundation.errors import ConfigError, ValidationError
from queue_engine.producer.cron import parse
from queue_engine.producer.schedules import ScheduleSpec, load_schedules, schedule_registry
from queue_engine.scheduler.store import schedule_args
from queue_engine.scheduler.ticker import Ticker, TickResult, due_slots, plan_slots

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _clean_schedules() -> Iterator[None]:
    schedule_registry.clear()
    yield
    schedule_registry.clear()


def test_periodic_above_task_uses_the_task_name_and_queue() -> None:
    @periodic("*/5 * * * *", args={"n": 1}, tz="Europe/Moscow")
    @task("load_cbr_a", queue="load.cbr")
    def load(args: dict[str, object]) -> None:
        return None

    spec = schedule_registry.get("load_cbr_a")
    assert spec is not None
    assert (spec.task, spec.queue, spec.tz, spec.args, spec.source) == (
        "load_cbr_a",
        "load.cbr",
        "Europe/Moscow",
        {"n": 1},
        "code",
    )


def test_periodic_below_task_is_resolved_later() -> None:
    @task("load_cbr_b")
    @periodic("every 30s", name="fast-b", catchup=2, overlap="skip")
    def load(args: dict[str, object]) -> None:
        return None

    [spec] = schedule_registry.specs()
    assert (spec.name, spec.task, spec.catchup, spec.overlap) == ("fast-b", "load_cbr_b", 2, "skip")


def test_registration_call_and_duplicate_names() -> None:
    periodic("0 3 * * *", task="nightly")
    periodic("0 3 * * *", task="nightly")  # the same declaration twice (re-import) is fine
    with pytest.raises(ValidationError, match="declared twice"):
        periodic("0 4 * * *", task="nightly")
    periodic("0 4 * * *", task="nightly", name="nightly-4")
    assert [s.name for s in schedule_registry.specs()] == ["nightly", "nightly-4"]


def test_periodic_on_a_plain_function_is_refused_when_resolved() -> None:
    @periodic("* * * * *")
    def not_a_task(args: dict[str, object]) -> None:
        return None

    with pytest.raises(ValidationError, match="not a registered task"):
        schedule_registry.specs()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"expression": "* * * 13 *"}, "month field '13' out of range 1-12"),
        ({"tz": "Nowhere/City"}, "unknown time zone 'Nowhere/City'"),
        ({"catchup": -1}, "catchup must be an integer between 0 and 1000"),
        ({"catchup": True}, "catchup must be an integer"),
        ({"overlap": "queue"}, "overlap must be 'allow' or 'skip'"),
        ({"queue": "bad queue"}, "invalid queue name"),
        ({"args": {"_schedule": 1}}, "'_schedule' is reserved"),
        ({"args": {"x": object()}}, "not JSON-serialisable"),
        ({"priority": 5000}, "priority must be an integer between 0 and 1000"),
        ({"max_attempts": 0}, "max_attempts must be an integer between 1 and 1000"),
        ({"name": "has space"}, "invalid schedule name 'has space'"),
    ],
)
def test_invalid_options_are_refused_at_declaration(
    options: dict[str, object], message: str
) -> None:
    values: dict[str, object] = {"expression": "* * * * *", "task": "t", "name": "s", **options}
    with pytest.raises(ValidationError) as info:
        ScheduleSpec(**values)  # type: ignore[arg-type]
    assert message in str(info.value)
    with pytest.raises(ValidationError):
        expression = str(values.pop("expression"))
        periodic(expression, **values)  # type: ignore[arg-type]


def test_schedule_args_carry_the_reason_under_a_reserved_key() -> None:
    spec = ScheduleSpec(name="s", expression="every 1m", task="t", args={"a": 1}, tz="Asia/Tokyo")
    slot = spec.trigger.next_after(T0)
    assert slot is not None
    assert schedule_args(spec, slot, "schedule") == {
        "a": 1,
        "_schedule": {"schedule": "s", "slot": "2026-06-01T21:01:00+09:00", "reason": "schedule"},
    }
    assert schedule_args(spec, None, "manual")["_schedule"]["slot"] is None


def test_load_schedules_reports_a_bad_module_as_config_error() -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_schedules("no_such_module_for_the_scheduler")
    with pytest.raises(ConfigError, match="no app module"):
        load_schedules("")


# -- pure slot planning (virtual clock) ----------------------------------------


def test_due_slots_are_the_slots_after_the_cursor_up_to_now() -> None:
    trigger = parse("every 10s")
    assert due_slots(trigger, T0, T0 + timedelta(seconds=35)) == [
        T0 + timedelta(seconds=s) for s in (10, 20, 30)
    ]
    assert due_slots(trigger, T0, T0 + timedelta(seconds=9)) == []


def test_plan_skips_missed_slots_by_default_and_keeps_late_ones() -> None:
    trigger = parse("every 10s")
    plan = plan_slots(trigger, T0, T0 + timedelta(minutes=10), grace=timedelta(seconds=25))
    assert plan.fire == [T0 + timedelta(seconds=s) for s in (580, 590, 600)]
    assert plan.missed == 57
    assert plan.first_missed == T0 + timedelta(seconds=10)
    assert plan.last_missed == T0 + timedelta(seconds=570)
    assert plan.through == T0 + timedelta(minutes=10)


def test_plan_catchup_takes_the_newest_missed_slots_oldest_first() -> None:
    trigger = parse("0 * * * *")
    plan = plan_slots(
        trigger, T0, T0 + timedelta(hours=10, minutes=5), catchup=3, grace=timedelta(minutes=1)
    )
    assert plan.fire == [T0 + timedelta(hours=h) for h in (8, 9, 10)]
    assert plan.missed == 7
    assert plan.last_missed == T0 + timedelta(hours=7)
    assert plan.through == T0 + timedelta(hours=10)


def test_plan_with_nothing_due() -> None:
    plan = plan_slots(parse("0 0 * * *"), T0, T0 + timedelta(hours=1), grace=timedelta(minutes=1))
    assert (plan.fire, plan.missed, plan.through) == ([], 0, None)


def test_plan_after_a_long_outage_is_bounded() -> None:
    trigger = parse("every 1s")
    plan = plan_slots(trigger, T0, T0 + timedelta(days=30), catchup=5, grace=timedelta(seconds=2))
    assert len(plan.fire) == 5 + 2
    assert plan.missed >= 9_000  # counted up to a cap, not enumerated for a month
    assert plan.through == T0 + timedelta(days=30)


def test_ticker_sleeps_until_the_next_slot_capped_and_backs_off_on_errors() -> None:
    now = T0
    ticks = iter([0.0, 0.25, 10.0, 10.0])  # monotonic: the run took 0.25 s
    ticker = Ticker(
        "",
        "queue_engine",
        scheduler_id="t",
        max_sleep_s=5.0,
        now=lambda: now,
        reconnect_max_s=2.0,
        # The backoff's jitter at its middle.
        timing=Timing(clock=lambda: next(ticks), rand=lambda: 0.5),
    )
    ticker._run_started = next(ticks)
    wake = TickResult(next_wake=T0 + timedelta(seconds=1.5))
    # 1.5 s to the slot from the wall clock now, plus the run time the loop subtracts again.
    assert ticker.next_interval(wake) == pytest.approx(1.75)
    ticker._run_started = 10.0
    far = TickResult(next_wake=T0 + timedelta(hours=1))
    assert ticker.next_interval(far) == pytest.approx(5.0)  # re-read the table at least every 5 s
    ticker.consecutive_errors = 1
    assert ticker.next_interval(None) == pytest.approx(0.1)
    ticker.consecutive_errors = 10
    assert ticker.next_interval(None) == pytest.approx(2.0)
