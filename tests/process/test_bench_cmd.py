"""Contract of ``queue-ctl bench`` against a given database.

It enqueues the jobs, drains them with real worker processes, measures wake
latency with idle workers, prints the three figures (numbers, not checked for
speed: this is not a performance test), stops the workers with exit 0, and
every job it enqueued succeeded.
"""

from __future__ import annotations

import re

from support.ctl import queue_ctl

NUMBER = r"[\d,]+(?:\.\d+)?"


def test_bench_prints_enqueue_drain_and_latency_figures(dsn: str, conn) -> None:
    done = queue_ctl(
        "bench",
        "--dsn",
        dsn,
        "--jobs",
        "300",
        "--workers",
        "2",
        "--latency-jobs",
        "50",
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    assert re.search(rf"^enqueue: +300 jobs in {NUMBER} s = {NUMBER} jobs/s", out, re.M), out
    assert re.search(rf"^drain: +300 jobs in {NUMBER} s = {NUMBER} jobs/s", out, re.M), out
    assert re.search(
        rf"^latency: +50 jobs .* p50 {NUMBER} ms, p95 {NUMBER} ms, p99 {NUMBER} ms", out, re.M
    ), out
    assert "workers stopped with SIGTERM: exit codes [0, 0]" in out
    counts = conn.execute(
        "SELECT status, count(*) FROM queue_engine.jobs WHERE queue = 'bench' GROUP BY status"
    ).fetchall()
    assert counts == [("succeeded", 350)]
