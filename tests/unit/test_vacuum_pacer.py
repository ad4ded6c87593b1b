"""The vacuumer's pacing: enough dead rows, a bounded share of the time, a back-off when blocked."""

from __future__ import annotations

import pytest

from queue_engine.orchestrator.vacuumer import BLOCKED_BACKOFF_MAX_S, VacuumPacer


def _pacer() -> VacuumPacer:
    return VacuumPacer(1000, max_share=0.05, base_s=1.0)


def test_due_only_at_the_threshold() -> None:
    pacer = _pacer()
    assert not pacer.due(999, now=0.0)
    assert pacer.due(1000, now=0.0)


def test_a_vacuum_buys_itself_nineteen_times_its_length_of_quiet() -> None:
    pacer = _pacer()
    assert not pacer.ran(10.0, 10.5, dead_after=0)  # 0.5 s at 5 %: 9.5 s without one
    assert not pacer.due(50_000, now=19.9)
    assert pacer.due(50_000, now=20.0)


def test_a_short_vacuum_is_not_held_back() -> None:
    pacer = _pacer()
    pacer.ran(10.0, 10.004, dead_after=10)
    assert pacer.due(1000, now=10.1)


def test_a_blocked_vacuum_backs_off_doubling_and_warns_once() -> None:
    pacer = _pacer()
    # Half the threshold or more left behind: the horizon is held back.
    assert pacer.ran(0.0, 0.01, dead_after=500) is True
    assert pacer.blocked_s == 1.0
    assert not pacer.due(5000, now=0.5)
    assert pacer.due(5000, now=1.01)
    assert pacer.ran(1.01, 1.02, dead_after=5000) is False  # still blocked: no second warning
    assert pacer.blocked_s == 2.0
    assert not pacer.due(5000, now=3.0)
    for _ in range(10):
        pacer.ran(0.0, 0.0, dead_after=5000)
    assert pacer.blocked_s == BLOCKED_BACKOFF_MAX_S


def test_a_vacuum_that_removes_enough_ends_the_back_off() -> None:
    pacer = _pacer()
    pacer.ran(0.0, 0.01, dead_after=900)
    pacer.ran(2.0, 2.01, dead_after=400)  # below half the threshold: unblocked
    assert pacer.blocked_s == 0.0
    assert pacer.due(1000, now=2.3)
    assert pacer.ran(3.0, 3.01, dead_after=900) is True  # a new series warns again


def test_a_skipped_vacuum_tries_again_after_the_check_interval() -> None:
    pacer = _pacer()
    pacer.skipped(5.0)
    assert not pacer.due(10_000, now=5.9)
    assert pacer.due(10_000, now=6.0)
    assert pacer.blocked_s == 0.0


@pytest.mark.parametrize(("dead_rows", "share"), [(0, 0.05), (1000, 0.0), (1000, 1.5)])
def test_bad_settings_are_refused(dead_rows: int, share: float) -> None:
    with pytest.raises(ValueError, match="VacuumPacer"):
        VacuumPacer(dead_rows, max_share=share, base_s=1.0)
