"""The testing kit's TestClock: moves only when told, forward only, always aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from queue_engine.testing.clock import TestClock, instant_of

START = datetime(2026, 11, 23, 5, 59, tzinfo=UTC)


def test_the_clock_stands_still_until_advanced() -> None:
    clock = TestClock(START)
    assert clock.now() == clock() == START
    assert clock.advance(90) == START + timedelta(seconds=90)
    assert clock.advance(minutes=1, seconds=30) == START + timedelta(minutes=3)
    assert clock.advance(timedelta(days=1)) == START + timedelta(days=1, minutes=3)
    assert clock.now() == START + timedelta(days=1, minutes=3)


def test_set_jumps_forward_and_converts_to_utc() -> None:
    clock = TestClock(START)
    moscow = timezone(timedelta(hours=3))
    assert clock.set(datetime(2026, 11, 23, 12, 0, tzinfo=moscow)) == datetime(
        2026, 11, 23, 9, 0, tzinfo=UTC
    )
    assert clock.now().tzinfo is UTC


@pytest.mark.parametrize("move", [lambda c: c.advance(-1), lambda c: c.set(START - timedelta(1))])
def test_time_never_goes_back(move) -> None:  # type: ignore[no-untyped-def]
    clock = TestClock(START)
    with pytest.raises(ValueError, match="only moves forward"):
        move(clock)
    assert clock.now() == START


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="aware datetime"):
        TestClock(datetime(2026, 11, 23))  # noqa: DTZ001
    with pytest.raises(ValueError, match="aware datetime"):
        instant_of(datetime(2026, 11, 23))  # noqa: DTZ001


def test_instant_of_reads_a_clock_each_time() -> None:
    clock = TestClock(START)
    assert instant_of(clock) == START
    clock.advance(5)
    assert instant_of(clock) == START + timedelta(seconds=5)
    assert instant_of(START) == START


def test_a_clock_without_start_is_near_the_real_time() -> None:
    before = datetime.now(UTC)
    clock = TestClock()
    assert before <= clock.now() <= datetime.now(UTC)
