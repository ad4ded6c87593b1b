"""The hard deadline's arming, driven by a virtual clock and a fake timer: no C thread, no waiting.

:class:`HardDeadline` decides when the process-wide faulthandler timer is
(re)armed and cancelled; :class:`JobWatchdog` drives it from ``arm``,
``disarm`` and its idle looks. The timer itself (faulthandler) is exercised
by the process test (tests/process/test_hard_deadline.py).
"""

from __future__ import annotations

import pytest
from support.timing import FakeTiming

from queue_engine.worker.deadline import (
    IDLE_CANCEL_S,
    REARM_TOLERANCE_S,
    FaultHandlerTimer,
    HardDeadline,
    keeps,
    process_timer,
    tolerance_for,
)
from queue_engine.worker.watchdog import EXIT_WATCHDOG, ArmedJob, JobWatchdog, Trip


class FakeTimer:
    """Records what the real timer would be told, with the clock reading it runs out at."""

    def __init__(self, clock: FakeTiming) -> None:
        self.clock = clock
        self.calls: list[str] = []
        self.runs_out_at: float | None = None

    def arm(self, timeout_s: float) -> None:
        assert timeout_s > 0
        self.calls.append("arm")
        self.runs_out_at = self.clock() + timeout_s

    def cancel(self) -> None:
        self.calls.append("cancel")
        self.runs_out_at = None

    def fired(self) -> bool:
        """True if the timer, as armed now, has run out at the current time."""
        return self.runs_out_at is not None and self.clock() >= self.runs_out_at


def harness(grace_s: float = 10.0) -> tuple[FakeTiming, FakeTimer, HardDeadline]:
    clock = FakeTiming()
    timer = FakeTimer(clock)
    return clock, timer, HardDeadline(grace_s, timer, clock=clock)


# -- keeps(): the pure rule ---------------------------------------------------------


def test_a_timer_is_kept_only_when_at_most_the_tolerance_early_and_never_late() -> None:
    assert keeps(100.0, 100.0, 0.5)
    assert keeps(99.5, 100.0, 0.5)
    assert not keeps(99.4, 100.0, 0.5)  # too early: the job would lose part of its grace
    assert not keeps(100.1, 100.0, 0.5)  # late: would break "within budget + grace"
    assert not keeps(None, 100.0, 0.5)


def test_the_tolerance_is_at_most_a_quarter_of_the_grace() -> None:
    assert tolerance_for(10.0) == REARM_TOLERANCE_S == 0.5
    assert tolerance_for(1.0) == 0.25


# -- HardDeadline ---------------------------------------------------------------------


def test_a_job_arms_the_timer_for_its_budget_plus_the_grace() -> None:
    clock, timer, hard = harness(grace_s=10)
    hard.job_started(clock(), budget_s=2)
    assert timer.calls == ["arm"]
    assert timer.runs_out_at == clock() + 12
    clock.advance(11.99)
    assert not timer.fired()
    clock.advance(0.01)
    assert timer.fired()


def test_a_stream_of_jobs_with_one_budget_keeps_the_timer_instead_of_rearming() -> None:
    clock, timer, hard = harness(grace_s=10)
    for _ in range(1000):  # 1,000 jobs of 1 ms each: one second
        hard.job_started(clock(), budget_s=5)
        # Every job's promise holds: the timer never runs out later than its deadline,
        # and at most the tolerance before it.
        assert timer.runs_out_at is not None
        wanted = clock() + 15
        assert wanted - hard.tolerance_s <= timer.runs_out_at <= wanted
        clock.advance(0.001)
        hard.job_ended()
    assert 1 < hard.arms <= 3, hard.arms  # re-armed about every half second, not per job
    assert "cancel" not in timer.calls


def test_a_shorter_budget_rearms_at_once() -> None:
    clock, timer, hard = harness(grace_s=10)
    hard.job_started(clock(), budget_s=3600)
    clock.advance(0.001)
    hard.job_ended()
    hard.job_started(clock(), budget_s=2)
    assert timer.calls == ["arm", "arm"]
    assert timer.runs_out_at == clock() + 12


def test_a_longer_budget_rearms_so_the_job_gets_its_whole_budget_and_grace() -> None:
    clock, timer, hard = harness(grace_s=10)
    hard.job_started(clock(), budget_s=2)
    clock.advance(1.9)
    hard.job_ended()
    hard.job_started(clock(), budget_s=2)  # the old timer would run out 1.9 s early
    assert timer.calls == ["arm", "arm"]
    assert timer.runs_out_at == clock() + 12


def test_an_idle_worker_cancels_the_timer_after_a_while_without_a_job() -> None:
    clock, timer, hard = harness()
    hard.job_started(clock(), budget_s=2)
    hard.idle_tick()  # a job runs: never cancelled
    clock.advance(1)
    hard.job_ended()
    hard.idle_tick()
    clock.advance(IDLE_CANCEL_S / 2)
    hard.idle_tick()
    assert timer.calls == ["arm"]  # between two jobs of a stream: left armed
    clock.advance(IDLE_CANCEL_S / 2)
    hard.idle_tick()
    assert timer.calls == ["arm", "cancel"]
    assert hard.armed_for is None
    clock.advance(3600)
    hard.idle_tick()
    assert timer.calls == ["arm", "cancel"]  # nothing to cancel any more
    hard.job_started(clock(), budget_s=2)
    assert timer.calls == ["arm", "cancel", "arm"]


def test_close_cancels_an_armed_timer_and_is_safe_twice() -> None:
    clock, timer, hard = harness()
    hard.close()
    assert timer.calls == []
    hard.job_started(clock(), budget_s=2)
    hard.close()
    hard.close()
    assert timer.calls == ["arm", "cancel"]


class BrokenTimer(FakeTimer):
    def arm(self, timeout_s: float) -> None:
        self.calls.append("arm")
        raise ValueError("I/O operation on closed file")


def test_a_timer_that_cannot_be_armed_is_logged_once_and_jobs_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeTiming()
    timer = BrokenTimer(clock)
    hard = HardDeadline(10, timer, clock=clock)
    for _ in range(3):
        hard.job_started(clock(), budget_s=2)  # never raises
        clock.advance(5)
        hard.job_ended()
    assert hard.off and timer.calls == ["arm"]  # not retried on every job
    assert [r.getMessage().split()[0] for r in caplog.records] == ["watchdog.hard_deadline_off"]


# -- JobWatchdog drives it ------------------------------------------------------------


class Exited(Exception):
    pass


def watchdog_with_deadline(
    grace_s: float = 10.0,
) -> tuple[FakeTiming, FakeTimer, JobWatchdog, list[str]]:
    clock = FakeTiming()
    timer = FakeTimer(clock)
    order: list[str] = []

    def record(armed: ArmedJob, trip: Trip) -> None:
        order.append(f"record {trip.kind}")

    def exit(code: int) -> None:
        order.append(f"exit {code}")
        raise Exited()

    wd = JobWatchdog(
        record,
        clock=clock,
        sleep=lambda _: None,
        exit=exit,
        hard_deadline=HardDeadline(grace_s, timer, clock=clock),
    )
    return clock, timer, wd, order


def test_the_watchdog_arms_the_deadline_with_each_job_and_cancels_it_when_idle() -> None:
    clock, timer, wd, _ = watchdog_with_deadline()
    wd.arm(7, 1, budget_s=2)
    assert timer.runs_out_at == clock() + 12
    wd.run_once()
    clock.advance(1)
    wd.disarm()
    wd.run_once()
    assert timer.calls == ["arm"]
    clock.advance(IDLE_CANCEL_S)
    wd.run_once()
    assert timer.calls == ["arm", "cancel"]
    wd.stop()
    assert timer.calls == ["arm", "cancel"]


def test_the_watchdogs_own_trip_comes_first_while_it_can_run() -> None:
    """At the budget the watchdog records the failure and exits 75; the hard deadline is later."""
    clock, timer, wd, order = watchdog_with_deadline(grace_s=1)
    wd.arm(7, 1, budget_s=2)
    clock.advance(1.9)
    wd.run_once()
    assert order == []
    clock.advance(0.1)
    assert not timer.fired()
    with pytest.raises(Exited):
        wd.run_once()
    assert order == ["record timeout", f"exit {int(EXIT_WATCHDOG)}"]
    assert timer.runs_out_at == clock() + 1  # the grace is still ahead


def test_a_job_kept_timer_still_leaves_most_of_the_grace_after_the_trip() -> None:
    clock, timer, wd, _ = watchdog_with_deadline(grace_s=1)
    wd.arm(7, 1, budget_s=2)
    clock.advance(0.2)
    wd.disarm()
    wd.arm(8, 1, budget_s=2)  # kept: armed 0.2 s early, within the tolerance
    assert timer.calls == ["arm"]
    assert timer.runs_out_at is not None
    assert timer.runs_out_at - (clock() + 2) >= 1 - tolerance_for(1) > 0


def test_stop_cancels_the_deadline_of_a_running_job() -> None:
    _, timer, wd, _ = watchdog_with_deadline()
    wd.arm(7, 1, budget_s=2)
    wd.stop()
    assert timer.calls == ["arm", "cancel"]


# -- the real timer ---------------------------------------------------------------------


def test_the_process_timer_writes_to_a_stream_with_a_descriptor() -> None:
    timer = process_timer()
    assert isinstance(timer, FaultHandlerTimer)
    assert timer.file.fileno() >= 0
