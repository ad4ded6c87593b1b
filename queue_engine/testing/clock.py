"""A wall clock a test moves by hand: :class:`TestClock`.

The engine reads the time of scheduled and delayed work in two places: the
scheduler's ticker (its ``now`` callable decides which slots are due) and the
database (a job runs once ``available_at <= now()``). A test that waited for
either would be slow and flaky, so the kit lets it move time instead:

- :func:`queue_engine.testing.tick` runs the real ticker once with the clock's
  ``now``: the slots up to it are enqueued, exactly as a scheduler would;
- :func:`queue_engine.testing.drain` with ``at=clock`` runs the jobs due by the
  clock's instant (``available_at <= at``), making them due in the database
  first; the jobs' own timestamps are left to Postgres.

The clock is plain data: nothing reads it behind the test's back, and the
worker's hot path never sees it. It starts at the real current time (so the
delayed jobs of the test and the clock agree on "now") unless given a start.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["Instant", "TestClock", "instant_of"]


class TestClock:
    """A timezone-aware clock that moves only when told: ``now()``, ``advance()``, ``set()``.

    It is callable (``clock()`` is ``clock.now()``), so it fits wherever the
    engine takes a ``now`` function, such as the scheduler's ticker.
    """

    __test__ = False  # a pytest collector must not take the class for a test

    def __init__(self, start: datetime | None = None) -> None:
        self._now = _aware(start) if start is not None else datetime.now(UTC)

    def now(self) -> datetime:
        """The clock's current instant (UTC)."""
        return self._now

    __call__ = now

    def advance(self, delta: timedelta | float = 0.0, **parts: float) -> datetime:
        """Move forward by ``delta`` (seconds, or a timedelta) plus ``timedelta(**parts)``.

        ``clock.advance(90)``, ``clock.advance(minutes=5)``, ``clock.advance(days=1)``.
        Moving backwards is refused: a schedule never sees time go back.
        """
        step = delta if isinstance(delta, timedelta) else timedelta(seconds=delta)
        step += timedelta(**parts)
        if step < timedelta(0):
            raise ValueError(f"a TestClock only moves forward, not by {step}")
        self._now += step
        return self._now

    def set(self, at: datetime) -> datetime:
        """Jump to ``at`` (an aware datetime, not before the current instant)."""
        target = _aware(at)
        if target < self._now:
            raise ValueError(f"a TestClock only moves forward: {target} is before {self._now}")
        self._now = target
        return self._now

    def __repr__(self) -> str:
        return f"TestClock({self._now.isoformat()})"


#: Where the kit takes an instant: a datetime, or a clock read at the moment it is used.
Instant = datetime | TestClock


def instant_of(at: Instant) -> datetime:
    """The datetime ``at`` stands for now (a clock is read each time)."""
    return at.now() if isinstance(at, TestClock) else _aware(at)


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"give an aware datetime (with tzinfo), not {value!r}")
    return value.astimezone(UTC)
