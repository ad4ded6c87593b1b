"""The arithmetic behind ``queue-ctl stats``: rates, the replicas suggestion, formatting.

The replicas suggestion is Little's law with headroom:
``ceil(arrival_rate_per_s * mean_run_s / target_utilisation)``, at least 1
while jobs wait or run, 0 for an idle queue.
"""

from __future__ import annotations

import pytest

from queue_engine.operator import stats
from queue_engine.orchestrator.metrics import DURATION_BUCKETS_S, histogram_buckets
from queue_engine.orchestrator.pruner import Retention


def test_rate_per_s() -> None:
    assert stats.rate_per_s(90, 900) == pytest.approx(0.1)
    assert stats.rate_per_s(0, 60) == 0
    with pytest.raises(ValueError):
        stats.rate_per_s(1, 0)


@pytest.mark.parametrize(
    ("rate", "mean_run", "backlog", "expected"),
    [
        (1.0, 3.5, 0, 5),  # 3.5 busy workers / 0.7 = 5 exactly (no float noise)
        (1.0, 3.6, 0, 6),  # 5.14 -> 6
        (10.0, 0.07, 0, 1),  # 0.7 busy / 0.7 = 1
        (2.0, 10.0, 0, 29),  # 28.57 -> 29
        (0.0, 5.0, 0, 0),  # nothing arrives, nothing waits: idle queue
        (0.0, 5.0, 3, 1),  # a backlog always gets a worker
        (0.5, None, 0, 0),  # no run time known yet, nothing waiting
        (0.5, None, 7, 1),  # no run time known yet, work waiting
        (0.01, 4.0, 1, 1),  # tiny load rounds up to 1 anyway
    ],
)
def test_replicas_suggestion(
    rate: float, mean_run: float | None, backlog: int, expected: int
) -> None:
    assert stats.replicas_suggestion(rate, mean_run, backlog=backlog) == expected


def test_replicas_suggestion_target_utilisation_and_bad_input() -> None:
    assert stats.replicas_suggestion(1.0, 4.0, target_utilisation=1.0) == 4
    assert stats.replicas_suggestion(1.0, 4.0, target_utilisation=0.5) == 8
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError):
            stats.replicas_suggestion(1.0, 1.0, target_utilisation=bad)
    with pytest.raises(ValueError):
        stats.replicas_suggestion(-1.0, 1.0)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0.25, "250ms"),
        (12.34, "12.3s"),
        (245, "4m05s"),
        (7800, "2h10m"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (-2, "-2.0s"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert stats.format_duration(seconds) == text


def test_format_bytes() -> None:
    assert stats.format_bytes(None) == "-"
    assert stats.format_bytes(512) == "512B"
    assert stats.format_bytes(1536) == "1.5K"
    assert stats.format_bytes(100 * 1024 * 1024) == "100.0M"
    assert stats.format_bytes(5 * 1024**4) == "5120.0G"


def test_histogram_buckets_are_cumulative_and_end_with_inf() -> None:
    counts = [0] * (len(DURATION_BUCKETS_S) + 1)
    counts[0], counts[3], counts[-1] = 2, 5, 1
    pairs = histogram_buckets(counts)
    assert pairs[0] == ("0.01", 2.0)
    assert pairs[3] == ("0.5", 7.0)
    assert pairs[-1] == ("+Inf", 8.0)
    assert [v for _, v in pairs] == sorted(v for _, v in pairs)
    with pytest.raises(ValueError):
        histogram_buckets([1, 2])


def test_retention_groups() -> None:
    assert Retention().groups() == [
        (7 * 86400.0, ["succeeded"]),
        (30 * 86400.0, ["failed", "lost", "canceled"]),
    ]
    assert Retention(succeeded_s=0, lost_s=60).groups() == [
        (60.0, ["lost"]),
        (30 * 86400.0, ["failed", "canceled"]),
    ]
    assert Retention.uniform(10).groups() == [(10.0, ["succeeded", "failed", "lost", "canceled"])]


def test_record_result_counts_leader_service_runs() -> None:
    from queue_engine.orchestrator import metrics
    from queue_engine.orchestrator.dead_workers import DeadWorkerResult
    from queue_engine.orchestrator.reaper import ReapResult

    metrics.reset_counters()
    reaped = ReapResult(requeued=[object()] * 3, lost=[object()], canceled=[])  # type: ignore[list-item]
    metrics.record_result("reaper", reaped)
    metrics.record_result("dead_workers", DeadWorkerResult(flagged=[object()] * 2))  # type: ignore[list-item]
    metrics.record_result("reaper", None)
    metrics.record_result("heartbeat", object())

    class Gone:
        requeued = [1, 2]
        lost = [3]
        canceled: list[int] = []

    class Recovery:
        workers = [Gone(), Gone()]

    metrics.record_result("fast_recovery", Recovery())
    got = metrics.counters()
    assert (got["reaper_requeued"], got["reaper_lost"], got["reaper_canceled"]) == (3, 1, 0)
    assert got["dead_workers_flagged"] == 2
    assert got["fast_recovered"] == 6
    metrics.reset_counters()


def test_a_missing_prometheus_client_says_which_extra_to_install(monkeypatch) -> None:
    import sys

    from queue_engine.foundation.errors import ConfigError
    from queue_engine.orchestrator import metrics

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ConfigError, match=r"pip install 'queue-engine\[metrics\]'"):
        metrics.start_metrics_server("", "queue_engine", 0)
    metrics.count("reaper_requeued")  # counting never needs the library
