"""The worker's wait for a rated key's token (worker/ratewait.py), on an injected clock."""

from __future__ import annotations

import pytest

from queue_engine.worker.ratewait import MIN_WAIT_S, RateDue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_earliest_due_token_sets_the_wait() -> None:
    clock = Clock()
    due = RateDue(clock)
    due.on_notice("queue-engine rate due 0.250000")
    due.on_notice("queue-engine rate due 0.05")
    due.on_notice("queue-engine rate due 3")
    clock.now += 0.01
    assert due.take(cap_s=5) == pytest.approx(0.04)
    assert due.take(cap_s=5) is None  # taken: the next empty claim waits as usual


def test_the_wait_is_capped_and_floored() -> None:
    clock = Clock()
    due = RateDue(clock)
    due.on_notice("queue-engine rate due 60")
    assert due.take(cap_s=2.0) == 2.0
    # Contended (0) or already past: a short wait, never a tight loop.
    due.on_notice("queue-engine rate due 0")
    assert due.take(cap_s=2.0) == MIN_WAIT_S
    due.on_notice("queue-engine rate due 0.001")
    clock.now += 1
    assert due.take(cap_s=2.0) == MIN_WAIT_S


def test_other_notices_and_a_clear_leave_nothing_to_wait_for() -> None:
    due = RateDue(Clock())
    for text in (None, "", "some other notice", "queue-engine rate due soon"):
        due.on_notice(text)
    assert due.take(cap_s=1) is None
    due.on_notice("queue-engine rate due 0.5")
    due.clear()
    assert due.take(cap_s=1) is None
