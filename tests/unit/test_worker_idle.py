"""The idle worker's safety-poll interval (queue_engine/worker/idle.py): a pure function."""

from __future__ import annotations

import pytest

from queue_engine.worker.idle import IDLE_POLL_CAP_S, poll_interval


def fixed(value: float):  # type: ignore[no-untyped-def]
    return lambda: value


def test_off_polls_every_poll_s_whatever_the_fleet() -> None:
    assert poll_interval(1.0, 0, 500, fixed(0.9)) == 1.0


@pytest.mark.parametrize("idle", [1, 2, 5])
def test_a_small_fleet_polls_as_before(idle: int) -> None:
    """Five idle workers at rate 5 already poll five times a second at POLL_S = 1 s."""
    assert poll_interval(1.0, 5, idle, fixed(0.99)) == 1.0


def test_a_big_fleet_shares_the_rate_with_a_jitter_of_the_same_mean() -> None:
    # 100 idle workers, 5 polls a second together: each every 20 s on average.
    assert poll_interval(1.0, 5, 100, fixed(0.5)) == pytest.approx(20.0)
    assert poll_interval(1.0, 5, 100, fixed(0.0)) == pytest.approx(10.0)
    assert poll_interval(1.0, 5, 100, fixed(0.999)) == pytest.approx(29.98)


def test_the_wait_is_capped_and_never_shorter_than_poll_s() -> None:
    assert poll_interval(1.0, 5, 10_000, fixed(0.9)) == IDLE_POLL_CAP_S
    # The jitter's low end does not go below POLL_S.
    assert poll_interval(1.0, 5, 6, fixed(0.0)) == 1.0
    # A POLL_S above the cap wins over it (the operator asked for rare polls).
    assert poll_interval(60.0, 5, 10_000, fixed(0.9)) == 60.0
