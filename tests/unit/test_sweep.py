"""The sweep base (``orchestrator/sweep.py``): the batch loop, construction, the session.

No database: the batch loop is pure, and the session is checked with a stand-in
for the service's lazy connection (what the sweeps do with a real one is in
``tests/integration/test_reaper.py``, ``test_dead_workers.py`` and
``test_pruner.py``).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from queue_engine.daemon.service import IdleResult
from queue_engine.foundation.db import LazyConnection
from queue_engine.orchestrator import DeadWorkerSweep, FastRecovery, Reaper
from queue_engine.orchestrator.pruner import Pruner, Retention
from queue_engine.orchestrator.sweep import SweepService, run_batches


def test_batches_run_until_one_says_nothing_is_left() -> None:
    answers = iter([True, True, False, True])
    assert run_batches(lambda: next(answers), max_batches=10, stopping=lambda: False) == 3


def test_batches_stop_at_max_batches() -> None:
    calls: list[int] = []
    ran = run_batches(lambda: calls.append(1) or True, max_batches=4, stopping=lambda: False)
    assert ran == 4 and len(calls) == 4


def test_batches_stop_before_the_next_one_once_stopping() -> None:
    calls: list[int] = []

    def batch() -> bool:
        calls.append(1)
        return True

    assert run_batches(batch, max_batches=10, stopping=lambda: len(calls) >= 2) == 2
    assert run_batches(batch, max_batches=10, stopping=lambda: True) == 0


def test_batches_need_a_positive_bound() -> None:
    with pytest.raises(ValueError, match="max_batches"):
        run_batches(lambda: False, max_batches=0, stopping=lambda: False)


class Idle(SweepService[IdleResult]):
    name = "idle_sweep"
    interval_default_s = 7.0
    batch_size_default = 3

    def run_once(self) -> IdleResult:
        with self.session() as conn:
            conn.execute("SELECT 1")
        return IdleResult()


class FakeConnection(LazyConnection):
    """The service's LazyConnection whose ``get`` hands out a connection that fails (no server)."""

    def __init__(self, error: Exception) -> None:
        super().__init__("postgresql:///x")
        self.error = error
        self.resets = 0

    def get(self) -> Any:
        error = self.error

        class Conn:
            def execute(self, *args: Any) -> None:
                raise error

        return Conn()

    def reset(self) -> None:
        self.resets += 1


def test_construction_takes_the_class_defaults_and_overrides() -> None:
    plain = Idle("postgresql:///x", "queue_engine")
    assert (plain.interval_s, plain.batch_size, plain.max_batches, plain.now()) == (
        7.0,
        3,
        1,
        None,
    )
    assert plain.log.name == "queue_engine.idle_sweep"
    tuned = Idle("postgresql:///x", "queue_engine", interval_s=2, batch_size=9, max_batches=4)
    assert (tuned.interval_s, tuned.batch_size, tuned.max_batches) == (2, 9, 4)
    with pytest.raises(ValueError, match="Idle: batch_size and max_batches must be >= 1"):
        Idle("postgresql:///x", "queue_engine", batch_size=0)


def test_the_four_sweeps_keep_their_defaults() -> None:
    dsn = "postgresql:///x"
    reaper = Reaper(dsn, "queue_engine")
    assert (reaper.interval_s, reaper.batch_size, reaper.max_batches) == (5.0, 1000, 20)
    dead = DeadWorkerSweep(dsn, "queue_engine")
    assert (dead.interval_s, dead.batch_size, dead.max_batches, dead.dead_after_s) == (
        5.0,
        100,
        1,
        30.0,
    )
    fast = FastRecovery(dsn, "queue_engine")
    assert (fast.interval_s, fast.stagger_s, fast.batch_size, fast.min_age_s) == (
        1.0,
        0.0,
        100,
        1.0,
    )
    pruner = Pruner(dsn, "queue_engine", retention=Retention())
    assert (pruner.interval_s, pruner.batch_size, pruner.max_batches, pruner.catch_up_s) == (
        60.0,
        1000,
        20,
        1.0,
    )
    with pytest.raises(ValueError, match="dead_after_s"):
        DeadWorkerSweep(dsn, "queue_engine", dead_after_s=0)
    with pytest.raises(ValueError, match="min_age_s"):
        FastRecovery(dsn, "queue_engine", min_age_s=-1)


def test_a_connection_error_drops_the_connection_and_propagates() -> None:
    sweep = Idle("postgresql:///x", "queue_engine")
    fake = FakeConnection(psycopg.OperationalError("server closed the connection"))
    sweep.db = fake
    with pytest.raises(psycopg.OperationalError):
        sweep.run_once()
    assert fake.resets == 1


def test_a_statement_error_keeps_the_connection() -> None:
    sweep = Idle("postgresql:///x", "queue_engine")
    fake = FakeConnection(psycopg.errors.UndefinedTable("no such table"))
    sweep.db = fake
    with pytest.raises(psycopg.errors.UndefinedTable):
        sweep.run_once()
    assert fake.resets == 0
