"""Rows of :mod:`queue_engine.operator.stats` built in memory, for tests of what shows them.

The renderers (``queue-ctl stats``/``workers``/``top``, the dashboard's live
view) are pure functions of these rows; a test names the figures it cares
about and gets zeros (counts) or None (durations, limits) for the rest.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from queue_engine.operator import stats

#: QueueStats fields that are None when nothing was measured or no limit is set.
_OPTIONAL = frozenset(
    {
        "oldest_queued_s",
        "wait_p50_s",
        "wait_p95_s",
        "run_p50_s",
        "run_p95_s",
        "run_mean_s",
        "scale_limit",
        "rate_limit",
        "rate_burst",
    }
)


def queue_stats(name: str = "q", **figures: Any) -> stats.QueueStats:
    """A queue's figures: zero counts, None durations and limits, unless given."""
    base: dict[str, Any] = {
        f: None if f in _OPTIONAL else 0
        for f in stats.QueueStats.__dataclass_fields__
        if f not in {"queue", "paused", "estimated", "at_least"}
    }
    base.update(figures)
    return stats.QueueStats(queue=name, **base)


def worker_row(worker_id: str = "host-a:4242:9f00aa", **fields: Any) -> stats.WorkerRow:
    """A live, idle worker of queue ``q`` that beat a second ago, unless given otherwise."""
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    base: dict[str, Any] = {
        "role": "worker",
        "host": "host-a",
        "pid": 4242,
        "queue": "q",
        "state": "idle",
        "current_job_id": None,
        "started_at": now,
        "heartbeat_at": now,
        "stopped_at": None,
        "flagged_dead_at": None,
        "heartbeat_age_s": 1.0,
        "rss_bytes": 52_428_800,
        "cpu_percent": 3.5,
        "liveness": "live",
    }
    base.update(fields)
    return stats.WorkerRow(id=worker_id, **base)
