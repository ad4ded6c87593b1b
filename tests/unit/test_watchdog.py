"""The job watchdog's decisions, driven by a virtual clock: no thread, no real waiting.

:func:`decide` is the whole policy (which trip, when, which exit code);
:class:`JobWatchdog.run_once` adds the arming, the notes other threads send,
and the order "log, record, exit" with injected recorder and exit functions.
"""

from __future__ import annotations

import threading

import pytest
from support.timing import FakeTiming

from queue_engine.worker.watchdog import (
    EXIT_GIVEN_BACK,
    EXIT_HARD_STOP,
    EXIT_STALL,
    EXIT_WATCHDOG,
    STALL_TIMEOUT_DEFAULT_S,
    ArmedJob,
    Graces,
    JobWatchdog,
    Trip,
    decide,
    job_budget_s,
    stall_timeout_s,
)


class Exited(Exception):
    """Raised by the fake exit so that nothing after ``exit`` runs, as with os._exit."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class Harness:
    """A watchdog on a virtual clock with a recording recorder and a raising exit."""

    def __init__(self, graces: Graces | None = None) -> None:
        self.clock = FakeTiming()
        self.recorded: list[tuple[ArmedJob, Trip]] = []
        self.exits: list[int] = []
        self.order: list[str] = []
        self.sleeps: list[float] = []
        self.wd = JobWatchdog(
            self.record,
            graces=graces or Graces(cancel_s=5, zombie_s=2, shutdown_s=30),
            clock=self.clock,
            sleep=self.sleeps.append,
            exit=self.exit,
        )

    def record(self, armed: ArmedJob, trip: Trip) -> None:
        self.order.append("record")
        self.recorded.append((armed, trip))

    def exit(self, code: int) -> None:
        self.order.append("exit")
        self.exits.append(code)
        raise Exited(code)

    def tick(self) -> Trip | None:
        """One look; returns the trip that exited the 'process', or None."""
        try:
            self.wd.run_once()
        except Exited:
            assert self.wd.tripped is not None
            return self.wd.tripped
        return None


def armed(**kw: object) -> ArmedJob:
    values: dict[str, object] = {"job_id": 7, "attempt": 1, "started": 0.0, "budget_s": 10.0}
    values.update(kw)
    return ArmedJob(**values)  # type: ignore[arg-type]


# -- the budget and the stall timeout ------------------------------------------


def test_budget_is_the_jobs_else_the_tasks_else_the_default() -> None:
    assert job_budget_s(5, 60, 3600) == 5.0
    assert job_budget_s(None, 60, 3600) == 60.0
    assert job_budget_s(None, None, 3600) == 3600.0


def test_stall_watchdog_is_opt_in_per_task() -> None:
    assert stall_timeout_s(None) is None
    assert stall_timeout_s(False) is None
    assert stall_timeout_s(30) == 30.0
    assert stall_timeout_s(True) == STALL_TIMEOUT_DEFAULT_S == 120.0


# -- decide(): the pure policy ---------------------------------------------------


def test_nothing_is_due_within_the_budget() -> None:
    assert decide(armed(), 9.99, Graces(), None) is None


def test_budget_exceeded_is_exit_75_with_the_watchdog_error() -> None:
    trip = decide(armed(budget_s=2.0), 2.0, Graces(), None)
    assert trip == Trip("timeout", EXIT_WATCHDOG, "watchdog: exceeded 2s budget")


def test_stall_is_armed_only_by_the_first_beat() -> None:
    job = armed(budget_s=100.0, stall_s=5.0)
    assert decide(job, 50.0, Graces(), None) is None  # never beat: not armed
    job.last_beat = 50.0
    assert decide(job, 54.9, Graces(), None) is None
    trip = decide(job, 55.0, Graces(), None)
    assert trip is not None and (trip.kind, trip.exit_code) == ("stall", EXIT_STALL)
    assert "no progress beat for 5s" in trip.message


def test_a_task_without_stall_timeout_never_stalls() -> None:
    job = armed(budget_s=100.0, stall_s=None, last_beat=0.0)
    assert decide(job, 99.0, Graces(), None) is None


def test_ignored_cancel_is_a_hard_stop_after_the_grace() -> None:
    job = armed(budget_s=100.0, cancel_at=10.0)
    graces = Graces(cancel_s=5)
    assert decide(job, 14.9, graces, None) is None
    trip = decide(job, 15.0, graces, None)
    assert trip is not None and (trip.kind, trip.exit_code) == ("cancel", EXIT_HARD_STOP)


def test_zombie_is_a_hard_stop_and_wins_over_every_other_trip() -> None:
    job = armed(budget_s=1.0, cancel_at=0.0, lost_at=0.0, stall_s=1.0, last_beat=0.0)
    trip = decide(job, 100.0, Graces(cancel_s=0, zombie_s=0, shutdown_s=0), 0.0)
    assert trip is not None and (trip.kind, trip.exit_code) == ("zombie", EXIT_HARD_STOP)


def test_sigterm_grace_gives_the_job_back_with_exit_0() -> None:
    job = armed(budget_s=1000.0)
    graces = Graces(shutdown_s=30)
    assert decide(job, 29.0, graces, stop_at=0.0) is None
    trip = decide(job, 30.0, graces, stop_at=0.0)
    assert trip is not None and (trip.kind, trip.exit_code) == ("give_back", EXIT_GIVEN_BACK)


def test_a_hard_stop_gives_the_job_back_at_once_but_never_a_zombies() -> None:
    job = armed(budget_s=1000.0)
    graces = Graces(shutdown_s=30)
    trip = decide(job, 0.0, graces, stop_at=0.0, stop_now_at=0.0)
    assert trip is not None and (trip.kind, trip.exit_code) == ("give_back", EXIT_GIVEN_BACK)
    assert "stop --now" in trip.message
    zombie = decide(armed(lost_at=0.0), 5.0, Graces(zombie_s=2), None, stop_now_at=0.0)
    assert zombie is not None and zombie.kind == "zombie"


def test_budget_wins_over_the_shutdown_grace() -> None:
    trip = decide(armed(budget_s=5.0), 40.0, Graces(shutdown_s=30), stop_at=0.0)
    assert trip is not None and trip.kind == "timeout"


# -- JobWatchdog: arming, notes, record then exit -----------------------------------


def test_idle_watchdog_never_trips() -> None:
    h = Harness()
    h.clock.advance(10_000)
    assert h.tick() is None and h.exits == []


def test_timeout_records_then_exits_75() -> None:
    h = Harness()
    h.wd.arm(7, 2, budget_s=2.0)
    h.clock.advance(1.9)
    assert h.tick() is None
    h.clock.advance(0.1)
    trip = h.tick()
    assert trip is not None and trip.exit_code == EXIT_WATCHDOG
    assert h.order == ["record", "exit"] and h.exits == [75]
    job, recorded = h.recorded[0]
    assert (job.job_id, job.attempt, recorded.message) == (7, 2, "watchdog: exceeded 2s budget")


def test_beats_keep_a_stall_watchdog_quiet_until_they_stop() -> None:
    h = Harness()
    h.wd.arm(7, 1, budget_s=1000.0, stall_s=3.0)
    h.clock.advance(100)  # no beat yet: a handler that never reports progress is not stalled
    assert h.tick() is None
    for _ in range(10):
        h.wd.beat()
        h.clock.advance(2.5)
        assert h.tick() is None
    h.clock.advance(0.5)
    trip = h.tick()
    assert trip is not None and trip.kind == "stall" and h.exits == [EXIT_STALL]


def test_disarm_ends_the_watch_and_a_late_note_is_ignored() -> None:
    h = Harness()
    h.wd.arm(7, 1, budget_s=1.0)
    h.wd.disarm()
    h.wd.note_cancel(7)
    h.wd.note_lost(7, 1)
    h.clock.advance(100)
    assert h.tick() is None and h.recorded == []


def test_notes_for_another_job_or_attempt_are_ignored() -> None:
    h = Harness()
    h.wd.arm(7, 2, budget_s=1000.0)
    h.wd.note_cancel(8)
    h.wd.note_lost(7, 1)  # an earlier attempt of the same job
    h.clock.advance(500)
    assert h.tick() is None


def test_cancel_grace_counts_from_the_first_note() -> None:
    h = Harness(Graces(cancel_s=5, zombie_s=2, shutdown_s=30))
    h.wd.arm(7, 1, budget_s=1000.0)
    h.clock.advance(10)
    h.wd.note_cancel(7)
    h.clock.advance(3)
    h.wd.note_cancel(7)  # seen again by the heartbeat: does not restart the grace
    assert h.tick() is None
    h.clock.advance(2)
    trip = h.tick()
    assert trip is not None and trip.kind == "cancel" and h.exits == [EXIT_HARD_STOP]


def test_zombie_is_recorded_as_a_zombie_so_no_outcome_is_written() -> None:
    h = Harness()
    h.wd.arm(7, 1, budget_s=1000.0)
    h.wd.note_lost(7, 1)
    h.clock.advance(2)
    trip = h.tick()
    assert trip is not None and trip.kind == "zombie"
    # The recorder gets the kind: the worker's recorder writes no outcome for it.
    assert h.recorded[0][1].kind == "zombie"


def test_stop_before_the_job_starts_still_gives_it_back_after_the_grace() -> None:
    h = Harness(Graces(shutdown_s=30))
    h.wd.note_stop()
    h.clock.advance(20)
    h.wd.arm(7, 1, budget_s=1000.0)
    h.clock.advance(10)
    trip = h.tick()
    assert trip is not None and trip.kind == "give_back" and h.exits == [0]


def test_stop_now_trips_at_the_next_look_without_waiting_for_the_grace() -> None:
    h = Harness(Graces(shutdown_s=30))
    h.wd.arm(7, 1, budget_s=1000.0)
    h.clock.advance(1)
    h.wd.note_stop()
    assert h.tick() is None  # a plain stop waits for the grace
    h.wd.note_stop_now()
    trip = h.tick()
    assert trip is not None and trip.kind == "give_back" and h.exits == [0]
    assert h.order == ["record", "exit"]


def test_a_failing_recorder_does_not_prevent_the_exit() -> None:
    clock = FakeTiming()
    exits: list[int] = []

    def broken(armed: ArmedJob, trip: Trip) -> None:
        raise OSError("database unreachable")

    wd = JobWatchdog(broken, clock=clock, sleep=lambda s: None, exit=exits.append)
    wd.arm(1, 1, budget_s=1.0)
    clock.advance(1)
    assert wd.run_once() is not None
    assert exits == [EXIT_WATCHDOG]


def test_disarm_waits_for_a_trip_under_way() -> None:
    """A job ending while its trip is recorded must not also send its own outcome."""
    clock = FakeTiming()
    recording = threading.Event()
    release = threading.Event()
    exits: list[int] = []

    def slow(armed: ArmedJob, trip: Trip) -> None:
        recording.set()
        release.wait(5)

    wd = JobWatchdog(slow, clock=clock, sleep=lambda s: None, exit=exits.append)
    wd.arm(1, 1, budget_s=1.0)
    clock.advance(1)
    tripper = threading.Thread(target=wd.run_once)
    tripper.start()
    assert recording.wait(5)
    disarmed = threading.Event()
    main = threading.Thread(target=lambda: (wd.disarm(), disarmed.set()))
    main.start()
    assert not disarmed.wait(0.05)  # blocked: in production os._exit ends it here
    release.set()
    tripper.join(5)
    main.join(5)
    assert exits == [EXIT_WATCHDOG]


def test_last_tick_is_updated_on_every_look() -> None:
    h = Harness()
    h.clock.advance(5)
    h.tick()
    assert h.wd.last_tick == h.clock.now


@pytest.mark.parametrize("graces", [Graces(cancel_s=0), Graces(zombie_s=0)])
def test_zero_graces_trip_at_the_first_look(graces: Graces) -> None:
    h = Harness(graces)
    h.wd.arm(7, 1, budget_s=1000.0)
    h.wd.note_cancel(7)
    h.wd.note_lost(7, 1)
    assert h.tick() is not None
