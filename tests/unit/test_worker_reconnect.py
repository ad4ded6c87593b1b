"""The worker's reconnect backoff is the daemons' one backoff, capped by QUEUE_ENGINE_RECONNECT_MAX_S.

Before the daemons shared one settings table and one backoff, the worker used a
hard-coded 15 s cap (and jittered past it, up to 19.5 s) whatever the setting said.
"""

from __future__ import annotations

import pytest

from queue_engine.foundation import settings as table
from queue_engine.producer.tasks import TaskRegistry
from queue_engine.worker.connection import RECONNECT_BASE_S
from queue_engine.worker.loop import Worker
from queue_engine.worker.settings import WorkerSettings


def _worker() -> Worker:
    return Worker(WorkerSettings.from_env(queue="q", app="a"), TaskRegistry())


def test_the_worker_backoff_stops_at_the_reconnect_max_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QUEUE_ENGINE_RECONNECT_MAX_S", "3")
    backoff = _worker().connection.backoff
    assert backoff.delay(1, rand=lambda: 0.5) == pytest.approx(RECONNECT_BASE_S)
    assert backoff.delay(50, rand=lambda: 1.0) == 3.0
    assert backoff.delay(50, rand=lambda: 0.0) < 3.0


def test_the_default_cap_is_the_tables_and_is_never_exceeded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("QUEUE_ENGINE_RECONNECT_MAX_S", raising=False)
    backoff = _worker().connection.backoff
    assert backoff.delay(50, rand=lambda: 1.0) == table.RECONNECT_MAX_S.default
