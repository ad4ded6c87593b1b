"""How a worker logs its successes: one line per job, or one line per statement with prefetch.

With ``--prefetch`` > 1 the per-job ``job.succeeded`` INFO line was the
largest part of the worker's CPU per job (bench/runs/2026-11-27-log.md, "Prefetch: the
worker's Python per job"), so such a worker logs the successes of one
finish-and-claim statement in one ``job.succeeded_batch`` line and each job's
own line at DEBUG. Every job must still be named, and other outcomes keep
their own lines.
"""

from __future__ import annotations

import logging

import pytest
from support.workers import all_in, running_worker, wait_until

from queue_engine import Client

Q = "wt"


def _ids(ranges: str) -> set[int]:
    """The ids of a ``job_ids`` field (``4-103,105``)."""
    out: set[int] = set()
    for part in ranges.split(","):
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def _run(dsn: str, client: Client, caplog: pytest.LogCaptureFixture, prefetch: int):
    ok = client.enqueue_many([{"task": "echo", "queue": Q, "args": {"i": i}} for i in range(30)])
    bad = client.enqueue("permanent", queue=Q).id
    caplog.set_level(logging.DEBUG, logger="queue_engine.worker")
    with running_worker(dsn, prefetch=prefetch):
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="all finished")
    records = [r for r in caplog.records if r.name == "queue_engine.worker" and hasattr(r, "event")]
    return set(ok), bad, records


def test_a_prefetching_worker_logs_its_successes_one_line_per_statement(
    dsn: str, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    ok, bad, records = _run(dsn, client, caplog, prefetch=8)
    batches = [r for r in records if r.event == "job.succeeded_batch"]
    assert batches and all(r.levelno == logging.INFO for r in batches)
    named = [i for r in batches for i in _ids(r.fields["job_ids"])]
    assert sorted(named) == sorted(ok), "every success named once"
    assert sum(r.fields["jobs"] for r in batches) == len(ok)
    assert sum(int(r.fields["tasks"].split(":")[1]) for r in batches) == len(ok)
    assert all(r.fields["tasks"].startswith("echo:") for r in batches)
    # Each success's own line is still there, at DEBUG only.
    own = [r for r in records if r.event == "job.succeeded"]
    assert {r.fields["job_id"] for r in own} == ok
    assert all(r.levelno == logging.DEBUG for r in own)
    # Other outcomes keep their own line at their level.
    failed = [r for r in records if r.event == "job.failed"]
    assert [r.fields["job_id"] for r in failed] == [bad]
    assert failed[0].levelno == logging.WARNING


def test_a_one_at_a_time_worker_logs_one_info_line_per_success(
    dsn: str, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    ok, _bad, records = _run(dsn, client, caplog, prefetch=1)
    assert not [r for r in records if r.event == "job.succeeded_batch"]
    own = [r for r in records if r.event == "job.succeeded"]
    assert {r.fields["job_id"] for r in own} == ok
    assert all(r.levelno == logging.INFO for r in own)
