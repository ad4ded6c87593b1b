"""The flow-control gauges of ``/metrics``: per-key limits and per-partition depth.

Read on each scrape by :class:`~queue_engine.orchestrator.metrics.QueueCollector`
with the statements of ``queue-ctl stats`` (:mod:`queue_engine.operator.flow`),
so the figures agree. Label cardinality is bounded, whatever operators and
producers do:

- ``key``: only keys with an operator's limit (a ``concurrency_limits`` row),
  the :data:`MAX_KEYS` busiest (running + waiting); keys carried by jobs alone
  are not series (a producer could mint a key per job);
- ``partition``: the :data:`MAX_PARTITIONS` deepest partitions of each queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg

from queue_engine.operator import flow

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

PREFIX = "queue_engine"
#: At most this many ``key`` label values per concurrency gauge.
MAX_KEYS = 100
#: At most this many ``partition`` label values per queue.
MAX_PARTITIONS = 20


def flow_families(
    conn: psycopg.Connection[Any], schema: str, queues: list[str]
) -> Iterator[Metric]:
    """The concurrency-key gauges and the partition depth gauge (bounded, see the module)."""
    from prometheus_client.core import GaugeMetricFamily

    running = GaugeMetricFamily(
        f"{PREFIX}_concurrency_running",
        "Running jobs of a concurrency key with an operator's limit (top 100 keys).",
        labels=["key"],
    )
    limit = GaugeMetricFamily(
        f"{PREFIX}_concurrency_limit",
        "The operator's limit of a concurrency key (queue-ctl limits set; top 100 keys).",
        labels=["key"],
    )
    waiting = GaugeMetricFamily(
        f"{PREFIX}_concurrency_waiting",
        "Due queued jobs of a key the claim skips because the key is at its limit "
        "(counted over the first QUEUE_ENGINE_STATS_EXACT_CAP due jobs; top 100 keys).",
        labels=["key"],
    )
    for row in flow.key_flows(conn, schema, with_running=False, limit=MAX_KEYS):
        running.add_metric([row.key], row.running)
        if row.max_running is not None:
            limit.add_metric([row.key], row.max_running)
        waiting.add_metric([row.key], row.waiting)
    yield from (running, limit, waiting)

    queued = GaugeMetricFamily(
        f"{PREFIX}_partition_queued",
        "Due queued jobs per partition_key (the 20 deepest partitions of each queue; counted "
        "over the queue's first QUEUE_ENGINE_STATS_EXACT_CAP due jobs).",
        labels=["queue", "partition"],
    )
    for queue in queues:
        for part in flow.top_partitions(conn, schema, queue, limit=MAX_PARTITIONS):
            queued.add_metric([queue, part.partition_key], part.queued)
    yield queued
