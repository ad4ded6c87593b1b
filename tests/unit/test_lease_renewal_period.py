"""How often the heartbeat renews leases when a held job set a short lease of its own.

A job may set ``lease_ttl_s`` down to 1 s while the heartbeat beats every 10 s
by default: renewed only at the heartbeat, the lease would lapse while the job
runs. The period shrinks to a third of the shortest such lease while the job
is held (the real-Postgres check is ``tests/integration/test_worker_short_lease.py``).
Clock and wait are injected: nothing sleeps.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from queue_engine.daemon.heartbeat import TICK_S, Heartbeat
from queue_engine.daemon.service import Timing
from queue_engine.producer.context import ClaimedJob
from queue_engine.worker.jobs import HeldJobs
from queue_engine.worker.renewal import idle_beat_s, renew_period_s


class Target:
    """A heartbeat target whose beat period is set by the test."""

    def __init__(self, period_s: float) -> None:
        self.period = period_s
        self.beats: list[float] = []
        self.now = 0.0

    def register(self) -> str:
        return "idle"

    def beat(self) -> str:
        self.beats.append(self.now)
        return "busy"

    def mark_stopped(self) -> None:
        pass

    def progress_pending(self) -> bool:
        return False

    def job_running(self) -> bool:
        return True

    def poll_notifications(self) -> None:
        pass

    def period_s(self) -> float:
        return self.period

    def timing(self) -> Timing:
        return Timing(clock=lambda: self.now, wait=lambda e, s: False)


class Notes:
    def note_cancel(self, job_id: int) -> None:
        pass

    def note_lost(self, job_id: int, attempt: int | None = None) -> None:
        pass


def _job(job_id: int, lease_ttl_s: int | None) -> ClaimedJob:
    return ClaimedJob(job_id, "q", "t", {}, 1, 3, 100, None, lease_ttl_s, None, datetime.now(UTC))


@pytest.mark.parametrize(
    ("heartbeat_s", "lease_s", "expected"),
    [(10.0, None, 10.0), (10.0, 60, 10.0), (10.0, 30, 10.0), (10.0, 15, 5.0), (10.0, 1, 1 / 3)],
)
def test_period_is_the_heartbeat_or_a_third_of_the_shortest_own_lease(
    heartbeat_s: float, lease_s: int | None, expected: float
) -> None:
    assert renew_period_s(heartbeat_s, lease_s) == pytest.approx(expected)


def test_held_jobs_report_the_shortest_lease_they_set_themselves() -> None:
    jobs = HeldJobs(Notes(), worker_id="w", zombie_grace_s=10.0, clock=lambda: 0.0)
    assert jobs.shortest_own_lease_s() is None
    jobs.settle([], [_job(1, None), _job(2, 30), _job(3, 2)])
    assert jobs.shortest_own_lease_s() == 2
    jobs.forget(jobs.get(3))  # type: ignore[arg-type]
    assert jobs.shortest_own_lease_s() == 30


def _drive(target: Target, heartbeat_s: float, until: float) -> Heartbeat:
    """Run the heartbeat's loop on a virtual clock: run, then wait its next interval."""
    hb = Heartbeat(target, interval_s=heartbeat_s, timing=target.timing())
    while target.now < until:
        result = hb.run_once()
        target.now += hb.next_interval(result)
    return hb


def test_a_short_period_is_kept_not_rounded_up_to_the_tick() -> None:
    target = Target(period_s=1 / 3)  # a held job with lease_ttl_s = 1
    hb = _drive(target, heartbeat_s=10.0, until=5.0)
    gaps = [b - a for a, b in zip(target.beats, target.beats[1:], strict=False)]
    assert len(target.beats) >= 12
    # Ticks come four times per period, so every renewal is at most a quarter
    # period late: well within the 1 s lease (the old 0.25 s tick would not be).
    assert hb.next_interval(hb.run_once()) == pytest.approx(1 / 12)
    assert max(gaps) <= 1 / 3 + 1 / 12 + 1e-9


def test_the_tick_is_unchanged_without_a_short_lease() -> None:
    target = Target(period_s=10.0)
    hb = _drive(target, heartbeat_s=10.0, until=25.0)
    assert hb.next_interval(hb.run_once()) == TICK_S
    assert target.beats == pytest.approx([10.0, 20.0])


def test_the_period_shrinks_as_soon_as_a_short_lease_is_held() -> None:
    target = Target(period_s=10.0)
    hb = Heartbeat(target, interval_s=10.0, timing=target.timing())
    target.now = 3.0
    assert not hb.run_once().beat  # 3 s after the start: the 10 s beat is not due
    target.period = 1 / 3  # a job with a 1 s lease was claimed
    target.now = 3.1
    assert hb.run_once().beat  # the last beat is more than a third of the lease ago
    target.now = 3.2
    assert hb.next_interval(hb.run_once()) == pytest.approx(1 / 12)


@pytest.mark.parametrize(
    ("heartbeat_s", "dead_after_s", "expected"),
    [
        (10.0, 30.0, 20.0),  # the defaults: every 2 beats, a beat clear of the dead line
        (10.0, 25.0, 15.0),  # a short dead line: one heartbeat before it
        (10.0, 100.0, 20.0),  # a long one: still 2 beats at most
        (10.0, 12.0, 10.0),  # never more often than a busy worker
    ],
)
def test_an_idle_worker_beats_less_often_but_before_it_would_look_dead(
    heartbeat_s: float, dead_after_s: float, expected: float
) -> None:
    assert idle_beat_s(heartbeat_s, dead_after_s) == pytest.approx(expected)


def test_the_idle_period_applies_only_while_no_job_is_held() -> None:
    from queue_engine.worker.renewal import Renewer

    jobs = HeldJobs(Notes(), worker_id="w", zombie_grace_s=10.0, clock=lambda: 0.0)
    renewer = Renewer(
        None,  # type: ignore[arg-type]  # period_s never touches the connection
        jobs,
        worker_id="w",
        heartbeat_s=10.0,
        lease_ttl_s=60,
        state=lambda busy: "idle",
        warm_key=lambda: None,
        clock=lambda: 0.0,
        idle_beat_s=20.0,
    )
    assert renewer.period_s() == 20.0
    jobs.settle([], [_job(1, None)])  # a prefetched job is held: its lease needs the beat
    assert renewer.period_s() == 10.0


def test_a_worker_that_starts_a_job_beats_at_once_when_its_last_beat_is_a_heartbeat_old() -> None:
    """Idle, the beats come every 20 s; the job claimed 15 s after the last idle
    beat is renewed at the next tick, so a busy worker's row is never older than
    a heartbeat (plus a tick) and the dead-worker sweep's 30 s bound holds."""
    target = Target(period_s=20.0)
    hb = Heartbeat(target, interval_s=10.0, timing=target.timing())
    target.now = 15.0
    assert not hb.run_once().beat  # idle: the 20 s beat is not due
    target.now = 20.0
    assert hb.run_once().beat
    target.now = 35.0
    assert not hb.run_once().beat
    target.period = 10.0  # a job was claimed: 15 s since the last beat
    target.now = 35.25
    assert hb.run_once().beat
