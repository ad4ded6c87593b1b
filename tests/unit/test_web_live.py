"""The dashboard aggregator's pure parts: refresh rule, history, sparklines, fan-out."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest
from support.stats import queue_stats as qs

from queue_engine.operator import stats
from queue_engine.web import live

# -- RefreshPolicy -------------------------------------------------------------------


def test_first_read_is_due_at_once() -> None:
    policy = live.RefreshPolicy(poll_s=10, min_gap_s=1)
    assert policy.due(100.0, None, notified=False)
    assert policy.wait_s(100.0, None, notified=False) == 0.0


def test_without_notification_reads_on_the_poll() -> None:
    policy = live.RefreshPolicy(poll_s=10, min_gap_s=1)
    assert not policy.due(105.0, 100.0, notified=False)
    assert policy.wait_s(105.0, 100.0, notified=False) == 5.0
    assert policy.due(110.0, 100.0, notified=False)


def test_notification_reads_soon_but_never_within_the_gap() -> None:
    policy = live.RefreshPolicy(poll_s=10, min_gap_s=1)
    assert not policy.due(100.5, 100.0, notified=True)
    assert policy.wait_s(100.5, 100.0, notified=True) == 0.5
    assert policy.due(101.0, 100.0, notified=True)
    assert policy.wait_s(103.0, 100.0, notified=True) == 0.0


@pytest.mark.parametrize(("poll", "gap"), [(0, 0), (5, 6), (5, -1)])
def test_policy_rejects_nonsense(poll: float, gap: float) -> None:
    with pytest.raises(ValueError, match="poll_s"):
        live.RefreshPolicy(poll_s=poll, min_gap_s=gap)


# -- History -------------------------------------------------------------------------


def test_history_takes_at_most_one_sample_per_period() -> None:
    history = live.History(window_s=60, every_s=10)
    assert history.add(0.0, [qs("a", queued=1)])
    assert not history.add(5.0, [qs("a", queued=2)])
    assert history.add(10.0, [qs("a", queued=3)])
    assert history.series("a", "queued") == [(0.0, 1.0), (10.0, 3.0)]


def test_history_forgets_what_is_older_than_the_window() -> None:
    history = live.History(window_s=60, every_s=10)
    for t in range(0, 100, 10):
        history.add(float(t), [qs("a", queued=t)])
    assert [at for at, _ in history.series("a", "queued")] == [
        30.0,
        40.0,
        50.0,
        60.0,
        70.0,
        80.0,
        90.0,
    ]


def test_a_queue_that_disappeared_leaves_the_history_after_the_window() -> None:
    history = live.History(window_s=30, every_s=10)
    history.add(0.0, [qs("gone", queued=1), qs("kept")])
    for t in (10.0, 20.0, 30.0, 40.0):
        history.add(t, [qs("kept")])
    assert history.queues() == ["kept"]


def test_history_keeps_missing_percentiles_as_none() -> None:
    history = live.History()
    history.add(0.0, [qs("a", wait_p95_s=None, run_p95_s=1.5)])
    assert history.series("a", "wait_p95_s") == [(0.0, None)]
    assert history.series("a", "run_p95_s") == [(0.0, 1.5)]


def test_history_refuses_an_unsampled_figure() -> None:
    with pytest.raises(KeyError, match="not sampled"):
        live.History().series("a", "workers_dead")


# -- sparkline -----------------------------------------------------------------------


def test_sparkline_scales_to_the_box_and_the_window() -> None:
    points = [(0.0, 0.0), (50.0, 5.0), (100.0, 10.0)]
    line = live.sparkline(points, width=100, height=12, span_s=100, end=100.0)
    assert line == "0.0,11.0 50.0,6.0 100.0,1.0"


def test_sparkline_drops_points_left_of_the_window_and_missing_values() -> None:
    points = [(0.0, 3.0), (60.0, None), (90.0, 2.0), (100.0, 0.0)]
    line = live.sparkline(points, width=100, height=10, span_s=20, end=100.0)
    assert line == "50.0,1.0 100.0,9.0"


def test_sparkline_of_nothing_is_empty_and_of_zeros_is_flat() -> None:
    assert live.sparkline([]) == ""
    assert live.sparkline([(0.0, None)]) == ""
    assert live.sparkline([(0.0, 0.0), (10.0, 0.0)], height=10, span_s=10) == "0.0,9.0 120.0,9.0"


# -- snapshot and fan-out ----------------------------------------------------------


def test_snapshot_totals_add_up_the_queues() -> None:
    snap = live.FleetSnapshot(
        version=3,
        taken_at=None,
        queues=(qs("a", queued=2, running=1, failed_1h=1), qs("b", queued=5, lost_1h=2)),
    )
    event = snap.event()
    assert (event["version"], event["queued"], event["running"], event["failed_1h"]) == (3, 7, 1, 3)
    assert snap.queue("b") is not None and snap.queue("c") is None


def test_broadcaster_wakes_subscribers_from_another_thread() -> None:
    async def scenario() -> tuple[bool, bool, int]:
        hub = live.Broadcaster()
        sub = hub.subscribe()
        publisher = threading.Thread(target=hub.publish)
        publisher.start()
        publisher.join()
        await asyncio.wait_for(sub.changed.wait(), timeout=5)
        first = sub.closed
        sub.changed.clear()
        hub.publish(closing=True)
        await asyncio.wait_for(sub.changed.wait(), timeout=5)
        hub.unsubscribe(sub)
        hub.unsubscribe(sub)
        return first, sub.closed, len(hub)

    assert asyncio.run(scenario()) == (False, True, 0)


class FakeAggregator(live.Aggregator):
    """An aggregator whose reads come from a list instead of the database."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__(
            lambda: pytest.fail("no connection in a unit test"),
            "queue_engine",
            clock=lambda: clock[0],
        )
        self.figures: list[stats.QueueStats] = []


def test_failed_read_keeps_the_figures_and_says_why() -> None:
    now = [1000.0]
    agg = FakeAggregator(now)
    good = live.FleetSnapshot(version=1, taken_at=None, queues=(qs("a", queued=4),))
    agg._snapshot = good
    snap = agg.failed(RuntimeError("connection refused\ndetails"))
    assert snap.error == "connection refused"
    assert snap.version == 2 and snap.queues == good.queues
    assert replace(snap, error=None, version=1) == good


def test_seed_fills_the_past_before_the_first_samples() -> None:
    history = live.History(window_s=600, every_s=10)
    history.add(500.0, [qs("a", out_1m=9)])
    kept = history.seed(
        [("a", 400.0, 3.0), ("a", 460.0, 5.0), ("a", 500.0, 7.0), ("b", 480.0, 1.0)]
    )
    assert kept == 3  # the row at 500 is not older than the first sample
    assert history.series("a", "out_1m") == [(400.0, 3.0), (460.0, 5.0), (500.0, 9.0)]
    assert history.series("a", "queued") == [(400.0, None), (460.0, None), (500.0, 0.0)]
    assert history.queues() == ["a", "b"]


def test_with_nobody_watching_notifications_wait_for_the_poll() -> None:
    policy = live.RefreshPolicy(poll_s=10, min_gap_s=1)
    assert not policy.due(103.0, 100.0, notified=True, watched=False)
    assert policy.wait_s(103.0, 100.0, notified=True, watched=False) == 7.0
    assert policy.due(110.0, 100.0, notified=True, watched=False)
