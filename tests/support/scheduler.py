"""The scheduler's ``Ticker`` on the test database, for the tests that call ``run_once``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from queue_engine.scheduler.ticker import Ticker

SCHEMA = "queue_engine"


@pytest.fixture
def make_ticker(dsn: str) -> Iterator[Callable[..., Ticker]]:
    """``make_ticker(scheduler_id="ticker-1", **options)``: a Ticker, its connection closed after."""
    made: list[Ticker] = []

    def make(scheduler_id: str = "ticker-1", **kwargs: Any) -> Ticker:
        ticker = Ticker(dsn, SCHEMA, scheduler_id=scheduler_id, **kwargs)
        made.append(ticker)
        return ticker

    yield make
    for ticker in made:
        ticker.db.reset()
