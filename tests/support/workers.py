"""Helpers shared by the worker tests: run a worker in a thread or as a process, wait for state.

Nothing here sleeps for a fixed time to let something happen: every wait is a
bounded poll of a condition, so slow machines make tests slower, not flaky.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from queue_engine.producer.tasks import TaskRegistry
from queue_engine.worker import Worker, WorkerSettings
from queue_engine.worker.connection import WorkerConnection
from queue_engine.worker.jobs import HeldJobs

TESTS_DIR = Path(__file__).resolve().parent.parent
#: The task apps a worker runs (``--app qe_worker_tasks``), put on its PYTHONPATH.
APPS_DIR = TESTS_DIR / "worker_apps"
REPO_ROOT = TESTS_DIR.parent
WORKER_BIN = Path(sys.executable).parent / "queue-claim-worker"
LOG_TABLE_DDL = (
    "CREATE TABLE IF NOT EXISTS worker_test_log (job_id bigint, lock_key text, what text,"
    " started timestamptz, ended timestamptz, pid int)"
)


def wait_until(
    condition: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        time.sleep(interval)


def statuses(dsn: str) -> dict[int, str]:
    """``{job id: status}`` of every job, archived ones included (migration 0027)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return dict(conn.execute("SELECT id, status FROM queue_engine.jobs_all").fetchall())


def idle_workers(conn: psycopg.Connection[Any], queue: str | None = None) -> int:
    """How many live workers (on ``queue``, or on any) wait idle: a fleet is up when all do."""
    row = conn.execute(
        "SELECT count(*) FROM queue_engine.workers WHERE role = 'worker' AND state = 'idle'"
        " AND stopped_at IS NULL AND (%s::text IS NULL OR queue = %s)",
        (queue, queue),
    ).fetchone()
    return int(row[0]) if row else 0


def all_in(dsn: str, wanted: set[str]) -> Callable[[], bool]:
    """A condition: every job is in one of ``wanted`` (and there is at least one job)."""

    def check() -> bool:
        current = statuses(dsn)
        return bool(current) and all(s in wanted for s in current.values())

    return check


class NoNotes:
    """A held-jobs listener that ignores cancels and lost jobs (a session without a runner)."""

    def note_cancel(self, job_id: int) -> None:
        pass

    def note_lost(self, job_id: int, attempt: int | None = None) -> None:
        pass


def worker_session(dsn: str, *, worker_id: str, queue: str, **options: Any) -> WorkerConnection:
    """The worker's session alone (no loop, no runner): ``options`` as WorkerConnection takes them."""
    return WorkerConnection(
        dsn=dsn,
        schema="queue_engine",
        synchronous_commit="off",
        worker_id=worker_id,
        queue=queue,
        host="test-host",
        jobs=HeldJobs(NoNotes(), worker_id=worker_id, zombie_grace_s=1.0, clock=time.monotonic),
        stopping=threading.Event(),
        on_notify=lambda notify: None,
        on_connect=lambda: None,
        mark_alive=lambda: None,
        **options,
    )


def create_log_table(dsn: str) -> None:
    """The table ``record`` handlers write their start/end times into."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(LOG_TABLE_DDL)


@contextmanager
def running_worker(
    dsn: str, *, tasks: TaskRegistry | None = None, **settings: Any
) -> Iterator[Worker]:
    """A Worker on the ``wt`` queue running in a thread; stopped and joined on exit.

    ``tasks``: the registry to run (default: ``qe_worker_tasks``'); give ``queue`` with it.
    """
    import qe_worker_tasks

    options: dict[str, Any] = {
        "queue": qe_worker_tasks.QUEUE,
        "app": "qe_worker_tasks",
        "dsn": dsn,
        "poll_s": 0.1,
        "heartbeat_s": 0.5,
        "lease_ttl_s": 30,
    }
    options.update(settings)
    errors: list[BaseException] = []

    def no_exit(code: int) -> None:
        # A watchdog trip must not end the test process: fail the test instead.
        errors.append(AssertionError(f"the job watchdog would have exited with {code}"))

    registry = tasks if tasks is not None else qe_worker_tasks.private_registry()
    worker = Worker(WorkerSettings(**options), registry, exit=no_exit)

    def target() -> None:
        try:
            worker.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive(), "worker thread did not stop"
    if errors:
        raise errors[0]


def worker_env(**extra: str) -> dict[str, str]:
    """The environment of a worker subprocess: the test apps importable, short poll."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(APPS_DIR), str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env.setdefault("QUEUE_ENGINE_POLL_S", "0.1")
    env.setdefault("QUEUE_ENGINE_HEARTBEAT_S", "0.5")
    env.update(extra)
    return env


def spawn_worker(
    dsn: str,
    *args: str,
    log_file: Path | None = None,
    append: bool = False,
    queue: str = "wt",
    app: str = "qe_worker_tasks",
    log_level: str | None = None,
    **env: str,
) -> subprocess.Popen[bytes]:
    """Start ``queue-claim-worker --queue=QUEUE --app APP --dsn DSN *args`` (wt, qe_worker_tasks).

    Its output goes to ``log_file`` (after what is there with ``append``: a
    restarted worker's log), or nowhere; ``log_level`` adds ``--log-level``;
    ``env`` goes on top of :func:`worker_env`. The one way tests start a worker
    process: a test module that starts many alike binds its queue, app and
    cadences once with ``functools.partial``.
    """
    level = ("--log-level", log_level) if log_level is not None else ()
    mode = "ab" if append else "wb"
    out = open(log_file, mode) if log_file is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.Popen(
            [str(WORKER_BIN), f"--queue={queue}", "--app", app, *level, "--dsn", dsn, *args],
            env=worker_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finally:
        if log_file is not None and hasattr(out, "close"):
            out.close()


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
    """SIGTERM, wait, SIGKILL if needed; return the exit code (negative: killed by a signal)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(10)


def kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """For finally blocks: make sure no worker process outlives its test."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
