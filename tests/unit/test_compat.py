"""``queue_engine.producer.compat``: pqrun's priority and the old systems' retry delays.

Pure functions, no database: the conversion keeps pqrun's order (higher ran
first there, lower runs first here) and its default, within our 0..1000.
"""

from __future__ import annotations

from typing import Any

import pytest

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.compat import (
    DATALOADER_RETRY,
    PQRUN_RETRY,
    priority_from_pqrun,
)
from queue_engine.producer.validation import DEFAULT_PRIORITY


@pytest.mark.parametrize(
    ("pqrun", "ours"),
    [(0, 100), (10, 90), (-5, 105), (100, 0), (101, 0), (10**9, 0), (-900, 1000), (-(10**9), 1000)],
)
def test_pqrun_priority_becomes_ours(pqrun: int, ours: int) -> None:
    assert priority_from_pqrun(pqrun) == ours


def test_the_default_maps_to_the_default() -> None:
    assert priority_from_pqrun(0) == DEFAULT_PRIORITY


def test_the_order_is_kept_reversed_within_the_range() -> None:
    # pqrun ran the highest first; our claim runs the lowest first: the same jobs go first.
    pqrun_priorities = [50, -3, 0, 7, 100, -900, 12]
    pqrun_order = sorted(pqrun_priorities, reverse=True)
    our_order = sorted(pqrun_priorities, key=priority_from_pqrun)
    assert our_order == pqrun_order


@pytest.mark.parametrize("bad", [True, 1.5, "3", None])
def test_a_pqrun_priority_must_be_an_integer(bad: Any) -> None:
    with pytest.raises(ValidationError, match="a pqrun priority is an integer"):
        priority_from_pqrun(bad)


def test_the_old_systems_retry_delays() -> None:
    never = lambda: pytest.fail("no jitter: rand is not asked")  # noqa: E731
    assert [PQRUN_RETRY.delay(n, rand=never) for n in range(1, 8)] == [
        60,
        300,
        1800,
        7200,
        21600,
        21600,
        21600,
    ]
    assert [DATALOADER_RETRY.delay(n, rand=never) for n in (1, 2, 5)] == [30, 60, 150]
