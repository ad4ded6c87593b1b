"""Contract of the shared service lifecycle (:mod:`queue_engine.daemon.service`).

``start`` spawns and returns and is idempotent; ``stop`` blocks until the loop
ended, is safe twice and before ``start``, and interrupts the wait between
runs; ``run_once`` is callable directly and returns the result; the first run
is staggered by ``rand() * stagger_s``; the cadence is measured with the
injected clock; a failing run is retried with capped backoff; runs that did
work log at info, idle runs at debug. Waits are injected, so nothing here
depends on real time passing.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from support.timing import FakeTiming

from queue_engine.daemon.service import ERROR_BACKOFF_MAX_S, Service, Timing
from queue_engine.foundation.logs import format_fields, log_event


@dataclass(frozen=True)
class CountResult:
    n: int
    did_work: bool = False

    def log_fields(self) -> dict[str, Any]:
        return {"n": self.n}


class Counter(Service[CountResult]):
    name = "counter"

    def __init__(self, *, run_cost_s: float = 0.0, fail_times: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.count = 0
        self.run_cost_s = run_cost_s
        self.fail_times = fail_times
        self.ran = threading.Event()
        self.time: FakeTiming | None = None
        self.stopped_hook = 0

    def run_once(self) -> CountResult:
        if self.time is not None:
            self.time.now += self.run_cost_s
        self.ran.set()
        if self.fail_times > 0:
            self.fail_times -= 1
            raise RuntimeError("boom")
        self.count += 1
        return CountResult(self.count, did_work=self.count % 2 == 0)

    def on_stop(self) -> None:
        self.stopped_hook += 1


def make_counter(
    stop_after_waits: int, *, rand: float = 0.5, **kwargs: Any
) -> tuple[Counter, FakeTiming]:
    """A counter on a fake timing whose ``stop_after_waits``-th wait stops it."""
    fake = FakeTiming(rand=rand)
    service = Counter(timing=fake.timing, **kwargs)
    service.time = fake

    def stop_after() -> None:
        if len(fake.waits) >= stop_after_waits:
            service.stop()  # from the loop thread: must not deadlock

    fake.after_wait = stop_after
    return service, fake


def test_run_once_is_callable_directly_without_start() -> None:
    service = Counter(interval_s=10)
    assert service.run_once() == CountResult(1, did_work=False)
    assert service.run_once() == CountResult(2, did_work=True)
    assert not service.running


def test_stop_before_start_and_twice_is_safe() -> None:
    service = Counter(interval_s=10)
    service.stop()
    service.stop()
    assert not service.running
    assert service.count == 0
    assert service.stopped_hook == 0


def test_start_is_idempotent_and_stop_interrupts_a_long_wait() -> None:
    service = Counter(interval_s=3600, stagger_s=0)
    service.start()
    first_thread = service._thread
    service.start()
    assert service._thread is first_thread
    assert service.ran.wait(30), "the first run never happened"
    # The loop now waits an hour; stop must interrupt that wait, not sit it out.
    service.stop(timeout=30)
    assert not service.running
    assert service.count == 1
    assert service.stopped_hook == 1
    service.stop()  # again: a no-op
    assert service.stopped_hook == 1


def test_start_after_stop_runs_again() -> None:
    service = Counter(interval_s=3600, stagger_s=0)
    service.start()
    assert service.ran.wait(30)
    service.stop(timeout=30)
    service.ran.clear()
    service.start()
    assert service.ran.wait(30)
    service.stop(timeout=30)
    assert service.count == 2
    assert not service.running


def test_first_run_is_staggered_then_cadence_subtracts_run_time() -> None:
    service, fake = make_counter(
        stop_after_waits=3, interval_s=10, stagger_s=4, rand=0.5, run_cost_s=2.5
    )
    service.start()
    assert service._thread is not None
    service._thread.join(30)
    assert fake.waits == [2.0, 7.5, 7.5]
    assert service.count == 2


def test_stagger_is_capped_at_the_interval() -> None:
    service = Counter(interval_s=2, stagger_s=60)
    assert service.stagger_s == 2


def test_failing_runs_back_off_exponentially_capped_and_the_loop_survives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service, fake = make_counter(
        stop_after_waits=9, interval_s=4, stagger_s=0, fail_times=7, rand=0.5
    )
    with caplog.at_level(logging.WARNING, logger="queue_engine.counter"):
        service.start()
        assert service._thread is not None
        service._thread.join(30)
    # waits: stagger 0, then after failures 1..7: 4, 8, 16, 30 (cap), 30, 30, 30, then success: 4
    # (rand 0.5 puts the backoff's jitter at its middle)
    assert fake.waits == [0.0, 4.0, 8.0, 16.0, ERROR_BACKOFF_MAX_S, 30.0, 30.0, 30.0, 4.0]
    assert service.count == 1
    assert service.consecutive_errors == 0
    errors = [r for r in caplog.records if r.getMessage().startswith("counter.error")]
    assert len(errors) == 7
    assert "RuntimeError: boom" in errors[0].getMessage()


def test_error_backoff_is_jittered_below_the_cap() -> None:
    low = Counter(interval_s=4, timing=Timing(rand=lambda: 0.0))
    high = Counter(interval_s=4, timing=Timing(rand=lambda: 1.0))
    low.consecutive_errors = high.consecutive_errors = 2
    assert low.next_interval(None) == pytest.approx(8.0 * 0.7)
    assert high.next_interval(None) == pytest.approx(8.0 * 1.3)
    low.consecutive_errors = high.consecutive_errors = 9
    assert low.next_interval(None) == pytest.approx(ERROR_BACKOFF_MAX_S * 0.7)
    assert high.next_interval(None) == ERROR_BACKOFF_MAX_S  # the cap holds, jitter included
    slow = Counter(interval_s=60, timing=Timing(rand=lambda: 0.5))  # above the cap: starts at it
    slow.consecutive_errors = 1
    assert slow.next_interval(None) == ERROR_BACKOFF_MAX_S


def test_info_only_when_the_run_did_work(caplog: pytest.LogCaptureFixture) -> None:
    service = Counter(interval_s=10)
    with caplog.at_level(logging.DEBUG, logger="queue_engine.counter"):
        service.run_and_log()  # n=1, idle
        service.run_and_log()  # n=2, did work
    levels = [(r.levelno, r.getMessage().split(" elapsed_ms")[0]) for r in caplog.records]
    assert levels == [(logging.DEBUG, "counter.run n=1"), (logging.INFO, "counter.run n=2")]
    assert caplog.records[1].event == "counter.run"  # type: ignore[attr-defined]


def test_trigger_wakes_the_loop_early() -> None:
    service = Counter(interval_s=3600, stagger_s=0)
    service.start()
    try:
        assert service.ran.wait(30)
        service.ran.clear()
        service.trigger()
        assert service.ran.wait(30), "trigger did not cause a run"
    finally:
        service.stop(timeout=30)
    assert service.count >= 2


def test_invalid_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        Counter(interval_s=0)


def test_log_event_format(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("queue_engine.test_event")
    with caplog.at_level(logging.INFO, logger="queue_engine.test_event"):
        log_event(logger, logging.INFO, "reaper.requeued", count=2, reason="lease expired")
    assert caplog.records[0].getMessage() == "reaper.requeued count=2 reason='lease expired'"
    assert format_fields({"a": "", "b": 1}) == "a='' b=1"


class Gated(Service[CountResult]):
    """A service whose runs block until the test opens the gate."""

    name = "gated"

    def __init__(self) -> None:
        super().__init__(interval_s=3600, stagger_s=0)
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)
        self.count = 0
        self.concurrent = 0
        self.max_concurrent = 0
        self._guard = threading.Lock()

    def run_once(self) -> CountResult:
        with self._guard:
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
        self.entered.release()
        self.gate.wait(30)
        with self._guard:
            self.concurrent -= 1
            self.count += 1
        return CountResult(self.count)


def test_start_after_a_stop_that_timed_out_waits_for_the_old_loop() -> None:
    service = Gated()
    service.start()
    assert service.entered.acquire(timeout=30)
    service.stop(timeout=0)  # gives up waiting: the run is still in progress
    old = service._thread
    assert old is not None and old.is_alive()
    restarter = threading.Thread(target=service.start)
    restarter.start()  # must wait for the old loop, not return early nor run two loops
    service.gate.set()
    restarter.join(30)
    assert service.entered.acquire(timeout=30), "the restarted loop never ran"
    service.stop(timeout=30)
    assert not old.is_alive() and not service.running
    assert service.max_concurrent == 1
    assert service.count == 2
