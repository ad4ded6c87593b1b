"""Real ``queue-claim-worker`` processes on the bench queue, and a drain measured with them.

Every drain figure comes from the console script a user runs, started as a
process of its own (this build's, or another build's for an A/B), running the
no-op task of :mod:`lib.tasks`. A worker at INFO logs a line per job: that goes
to a file, as under systemd or the shared harness, never to this terminal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from lib.postgres import server_pids
from lib.timing import cpu_seconds
from queue_engine import Client

BENCH_DIR = Path(__file__).resolve().parent.parent
#: This build's worker: the console script beside this interpreter.
WORKER_BIN = Path(sys.executable).parent / "queue-claim-worker"
QUEUE = "bench"
#: The task module of the benches' workers (``noop``).
TASKS = "lib.tasks"
Conn = psycopg.Connection[Any]


def worker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment with ``bench/`` importable (for ``--app lib.tasks``) and ``extra`` set."""
    path = os.pathsep.join(p for p in (str(BENCH_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def start_workers(
    dsn: str,
    k: int,
    *,
    prefetch: int = 1,
    env: Mapping[str, str] | None = None,
    worker_bin: str | Path = "",
    log_level: str = "WARNING",
    app: str = TASKS,
    queue: str = QUEUE,
) -> list[subprocess.Popen[bytes]]:
    """Start K workers on ``queue`` (``worker_bin``: another build's console script)."""
    argv = [str(worker_bin or WORKER_BIN), f"--queue={queue}", "--app", app, "--dsn", dsn]
    argv += [f"--prefetch={prefetch}", "--log-level", log_level]
    with tempfile.TemporaryFile() as log:
        return [
            subprocess.Popen(argv, env=worker_env(env), stdout=subprocess.DEVNULL, stderr=log)
            for _ in range(k)
        ]


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, then SIGKILL what is left after 15 s."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def unfinished(conn: Conn) -> int:
    """Jobs still queued, waiting (a workflow's) or running."""
    row = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE status IN ('waiting', 'queued', 'running')"
    ).fetchone()
    return int(row[0]) if row else 0


def bench_left(conn: Conn) -> int:
    """Jobs of queue bench still queued or running, through the two partial indexes.

    One count per status: ``status IN ('queued', 'running')`` matches neither
    partial index's predicate, and once psycopg prepares the statement its plan
    was a sequential scan of the whole table, 5.8 s a poll at 11 million jobs,
    counted in the big database's server CPU per job (before 2026-11-24).
    """
    row = conn.execute(
        "SELECT (SELECT count(*) FROM queue_engine.jobs WHERE queue = 'bench' AND status = 'queued')"
        " + (SELECT count(*) FROM queue_engine.jobs WHERE queue = 'bench' AND status = 'running')"
    ).fetchone()
    return int(row[0]) if row else 0


def enqueue_noops(dsn: str, n: int, queue: str = QUEUE) -> list[int]:
    """``n`` no-op jobs in calls of 1,000 (one transaction each); their ids."""
    ids: list[int] = []
    with Client(dsn) as client:
        for start in range(0, n, 1000):
            ids += client.enqueue_many(
                [{"task": "noop", "queue": queue} for _ in range(min(1000, n - start))]
            )
    return ids


@dataclass(frozen=True, slots=True)
class Drained:
    """CPU seconds a drain cost the server and the workers."""

    server_cpu_s: float
    worker_cpu_s: float


def drain(
    conn: Conn,
    dsn: str,
    k: int,
    *,
    left: Callable[[Conn], int] = unfinished,
    timeout: float = 600.0,
    prefetch: int = 1,
    worker_bin: str | Path = "",
    env: Mapping[str, str] | None = None,
) -> Drained:
    """Start K workers on ``dsn`` (``conn``'s database) and wait until ``left(conn)`` is 0; stop them.

    The CPU is read before the workers exit: a backend's counters go with it.
    The workers log at WARNING (``prefetch``, ``worker_bin``, ``env``: as
    :func:`start_workers`).
    """
    server_before = cpu_seconds(server_pids(conn))
    procs = start_workers(dsn, k, prefetch=prefetch, env=env, worker_bin=worker_bin)
    try:
        deadline = time.monotonic() + timeout
        while (more := left(conn)) and time.monotonic() < deadline:
            time.sleep(0.05)
        server = cpu_seconds(server_pids(conn)) - server_before
        workers = cpu_seconds([p.pid for p in procs])
    finally:
        stop_workers(procs)
    if more:
        print(f"  warning: {more} jobs left after {timeout:g} s", file=sys.stderr)
    return Drained(server, workers)


def finished_span(conn: Conn, ids: list[int] | None = None) -> tuple[int, float]:
    """(jobs succeeded, seconds from the first start to the last finish), of ``ids`` or of all.

    Read from ``jobs_all``, so a job the archiver moved still counts.
    """
    where, params = ("WHERE id BETWEEN %s AND %s", (min(ids), max(ids))) if ids else ("", ())
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at))"
        f" FROM queue_engine.jobs_all {where}",
        params,
    ).fetchone()
    assert row is not None
    return int(row[0]), max(float(row[1] or 0.0), 1e-9)
