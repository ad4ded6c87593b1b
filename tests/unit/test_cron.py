"""Contract: schedule expressions compute slots from the schedule itself (virtual clock only).

5-field cron, a leading seconds field, ``@daily`` macros and ``every N`` intervals;
per-schedule IANA zones with the documented DST rule (hour field ``*`` follows
elapsed time; any other hour field names wall-clock slots, each firing once:
a nonexistent slot at the instant the clocks jump, an ambiguous one at its first
occurrence); bad expressions and zones are refused with a message naming the field.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.cron import parse

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def slots(expr: str, tz: str, start: datetime, end: datetime) -> list[datetime]:
    return parse(expr, tz).between(start, end, limit=100_000)


def local(values: list[datetime]) -> list[str]:
    return [v.isoformat() for v in values]


def gaps(values: list[datetime]) -> list[timedelta]:
    """Real time between consecutive slots (in UTC: same-zone subtraction is wall-clock)."""
    return [b.astimezone(UTC) - a.astimezone(UTC) for a, b in itertools.pairwise(values)]


# -- DST: Europe/Berlin (spring 2026-03-29 02:00 -> 03:00, fall 2026-10-25 03:00 -> 02:00)


def test_berlin_spring_forward_nonexistent_slot_fires_once_when_clocks_jump() -> None:
    day = slots(
        "30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 3, 27, 12, tzinfo=BERLIN),
        datetime(2026, 3, 30, 12, tzinfo=BERLIN),
    )
    assert local(day) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:30 does not exist: the first valid instant
        "2026-03-30T02:30:00+02:00",
    ]
    assert day[1] == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_berlin_spring_forward_gap_slots_collapse_to_one_and_do_not_double_03_00() -> None:
    fired = slots(
        "0,30 2,3 * * *",
        "Europe/Berlin",
        datetime(2026, 3, 29, 0, tzinfo=BERLIN),
        datetime(2026, 3, 29, 5, tzinfo=BERLIN),
    )
    assert local(fired) == ["2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"]


def test_berlin_fall_back_ambiguous_slot_fires_once_at_first_occurrence() -> None:
    fired = slots(
        "30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 10, 24, 12, tzinfo=BERLIN),
        datetime(2026, 10, 26, 12, tzinfo=BERLIN),
    )
    assert local(fired) == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]


def test_six_field_expressions_follow_the_same_wall_clock_rule() -> None:
    spring = slots(
        "15 30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 3, 29, 0, tzinfo=BERLIN),
        datetime(2026, 3, 29, 5, tzinfo=BERLIN),
    )
    assert local(spring) == ["2026-03-29T03:00:00+02:00"]
    fall = slots(
        "15 30 2 * * *",
        "Europe/Berlin",
        datetime(2026, 10, 25, 0, tzinfo=BERLIN),
        datetime(2026, 10, 25, 5, tzinfo=BERLIN),
    )
    assert local(fall) == ["2026-10-25T02:30:15+02:00"]


def test_hour_wildcard_follows_elapsed_time_through_both_transitions() -> None:
    spring = slots(
        "*/30 * * * *",
        "Europe/Berlin",
        datetime(2026, 3, 29, 1, tzinfo=BERLIN),
        datetime(2026, 3, 29, 4, tzinfo=BERLIN),
    )
    assert set(gaps(spring)) == {timedelta(minutes=30)}
    fall = slots(
        "*/30 * * * *",
        "Europe/Berlin",
        datetime(2026, 10, 25, 1, tzinfo=BERLIN),
        datetime(2026, 10, 25, 4, tzinfo=BERLIN),
    )
    assert set(gaps(fall)) == {timedelta(minutes=30)}
    # The repeated hour is there twice, as two distinct instants.
    assert "2026-10-25T02:30:00+02:00" in local(fall)
    assert "2026-10-25T02:30:00+01:00" in local(fall)
    assert len(fall) == len({s.astimezone(UTC) for s in fall}) == 8


# -- DST: America/New_York (spring 2026-03-08 02:00 -> 03:00, fall 2026-11-01 02:00 -> 01:00)


def test_new_york_spring_forward_and_fall_back() -> None:
    spring = slots(
        "30 2 * * *",
        "America/New_York",
        datetime(2026, 3, 7, 12, tzinfo=NEW_YORK),
        datetime(2026, 3, 9, 12, tzinfo=NEW_YORK),
    )
    assert local(spring) == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"]
    fall = slots(
        "30 1 * * *",
        "America/New_York",
        datetime(2026, 10, 31, 12, tzinfo=NEW_YORK),
        datetime(2026, 11, 2, 12, tzinfo=NEW_YORK),
    )
    assert local(fall) == ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"]


def test_daily_slots_are_24_wall_clock_hours_apart_except_across_dst() -> None:
    days = slots(
        "0 9 * * *",
        "America/New_York",
        datetime(2026, 3, 6, tzinfo=NEW_YORK),
        datetime(2026, 3, 10, tzinfo=NEW_YORK),
    )
    assert [d.hour for d in days] == [9, 9, 9, 9]
    assert gaps(days) == [
        timedelta(hours=24),
        timedelta(hours=23),
        timedelta(hours=24),
    ]


def test_reverse_iteration_agrees_with_forward_across_fall_back() -> None:
    trigger = parse("*/20 1,2 * * *", "America/New_York")
    start = datetime(2026, 10, 31, 12, tzinfo=NEW_YORK)
    end = datetime(2026, 11, 1, 12, tzinfo=NEW_YORK)
    forward = trigger.between(start, end)
    backward = list(itertools.takewhile(lambda s: s > start, trigger.iter_before(end)))
    assert forward == list(reversed(backward))
    assert (
        len(forward) == len({s.astimezone(UTC) for s in forward}) == 6
    )  # 01:00-02:40, the repeated hour once


# -- calendar edges


def test_month_ends_with_last_day_and_31st() -> None:
    last = slots(
        "0 0 L * *", "UTC", datetime(2028, 1, 1, tzinfo=UTC), datetime(2028, 5, 1, tzinfo=UTC)
    )
    assert [s.day for s in last] == [31, 29, 31, 30]
    thirty_first = slots(
        "0 12 31 * *",
        "UTC",
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 12, 31, 23, tzinfo=UTC),
    )
    assert [s.month for s in thirty_first] == [1, 3, 5, 7, 8, 10, 12]


def test_leap_day_schedule_fires_only_in_leap_years() -> None:
    fired = slots(
        "0 6 29 2 *",
        "Europe/Berlin",
        datetime(2025, 1, 1, tzinfo=UTC),
        datetime(2033, 1, 1, tzinfo=UTC),
    )
    assert local(fired) == [
        "2028-02-29T06:00:00+01:00",
        "2032-02-29T06:00:00+01:00",
    ]


def test_seconds_field_and_macros() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    fired = slots("*/15 * * * * *", "UTC", start, start + timedelta(minutes=1))
    assert [s.second for s in fired] == [15, 30, 45, 0]
    assert parse("@daily").next_after(start) == datetime(2026, 1, 2, tzinfo=UTC)
    assert parse("@hourly", "Asia/Kolkata").next_after(start) == datetime(
        2026, 1, 1, 0, 30, tzinfo=UTC
    )


# -- intervals


def test_interval_slots_are_epoch_aligned_and_never_drift() -> None:
    trigger = parse("every 7s", "Europe/Berlin")
    start = datetime(2026, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)
    first = trigger.next_after(start)
    assert first is not None
    assert (first - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() % 7 == 0
    run = list(itertools.islice(trigger.iter_after(start), 1000))
    assert run[-1] == first + timedelta(seconds=7 * 999)
    assert run[999] - run[0] == timedelta(seconds=6993)
    # The 1000th slot after the first is exactly first + 7000 s, however it is computed.
    assert trigger.between(first, first + timedelta(seconds=7000))[-1] == first + timedelta(
        seconds=7000
    )
    assert trigger.prev_before(first) == first - timedelta(seconds=7)
    assert trigger.next_after(first) == first + timedelta(seconds=7)


@pytest.mark.parametrize(
    ("expr", "seconds"),
    [("every 30s", 30), ("every 5m", 300), ("every 2h", 7200), ("every 1 minute", 60)],
)
def test_interval_units(expr: str, seconds: int) -> None:
    trigger = parse(expr)
    first = trigger.next_after(datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC))
    assert first is not None
    assert trigger.next_after(first) == first + timedelta(seconds=seconds)


def test_slots_are_in_the_schedule_zone_and_naive_times_are_refused() -> None:
    slot = parse("0 9 * * *", "Europe/Moscow").next_after(datetime(2026, 1, 1, tzinfo=UTC))
    assert slot is not None and slot.isoformat() == "2026-01-01T09:00:00+03:00"
    with pytest.raises(ValueError, match="timezone-aware"):
        parse("* * * * *").next_after(datetime(2026, 1, 1))  # noqa: DTZ001


# -- validation


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (
            "*/5 * * 13 *",
            "invalid cron expression '*/5 * * 13 *': month field '13' out of range 1-12",
        ),
        ("61 * * * *", "minute field '61' out of range 0-59"),
        ("0 24 * * *", "hour field '24' out of range 0-23"),
        ("0 0 0 * *", "day-of-month field '0' out of range 1-31"),
        ("0 0 * * 8", "day-of-week field '8' out of range 0-7"),
        ("60 * * * * *", "second field '60' out of range 0-59"),
        ("*/0 * * * *", "minute field '*/0': step '/0'"),
        ("5-1 * * * *", "minute field '5-1': range 5-1 runs backwards"),
        ("x * * * *", "minute field 'x' is not valid"),
        ("0 0 * FOO *", "month field 'FOO' is not valid"),
        ("0 0 31 2 *", "day-of-month field '31' never matches"),
        ("* * *", "expected 5 fields"),
        ("* * * * * * *", "got 7"),
        ("", "empty schedule expression"),
        ("@often", "unknown macro"),
        ("every 5x", "invalid interval 'every 5x'"),
        ("every 0s", "between 1 second and 7 days"),
    ],
)
def test_bad_expressions_are_refused_naming_the_field(expr: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse(expr)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "Europe/Berlin ", "../etc/passwd", "utc+3"])
def test_unknown_time_zones_are_refused(tz: str) -> None:
    with pytest.raises(ValidationError, match=r"unknown time zone .*: use an IANA name"):
        parse("* * * * *", tz)


def test_a_skipped_day_and_half_hour_shifts_follow_the_same_rule() -> None:
    # Samoa skipped 2011-12-30 entirely; Lord Howe moves its clocks by 30 minutes.
    apia = slots(
        "0 12 * * *",
        "Pacific/Apia",
        datetime(2011, 12, 29, tzinfo=UTC),
        datetime(2011, 12, 31, 12, tzinfo=UTC),
    )
    assert local(apia) == [
        "2011-12-29T12:00:00-10:00",
        "2011-12-31T00:00:00+14:00",  # the 30th never happened: once, when the day jumps
        "2011-12-31T12:00:00+14:00",
    ]
    howe = slots(
        "15 2 * * *",
        "Australia/Lord_Howe",
        datetime(2026, 10, 3, 12, tzinfo=UTC),
        datetime(2026, 10, 4, 12, tzinfo=UTC),
    )
    assert local(howe) == ["2026-10-04T02:30:00+11:00"]
