"""``WorkerProcesses``: workers beside an application, started and stopped with it.

The first tests run a real Starlette app under uvicorn (``tests/worker_apps/
beside_app.py``) whose lifespan starts two ``queue-claim-worker`` processes:
a job the app enqueues is done by one of them, and stopping the app stops
them (SIGTERM: a graceful stop; SIGKILL of the app: the kernel's parent-death
signal), so no worker outlives its app. The others drive the watching thread
with stand-in commands (``python -c``): a watchdog exit is restarted, a
configuration error is not, and a child ignoring SIGTERM is killed after the
stop timeout.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from support.ports import free_port
from support.workers import idle_workers, kill_all, wait_until, worker_env

from queue_engine import WorkerProcesses
from queue_engine.foundation.errors import ConfigError
from queue_engine.foundation.restarts import RestartPolicy

#: Worker pids a test saw, killed at its end if a failure left them running.
_seen: list[int] = []


@pytest.fixture
def app_server(dsn: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``uvicorn beside_app:app`` on a free port (its workers: see :func:`_wait_up`)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "beside_app:app", "--port", str(port)],
        env=worker_env(QUEUE_ENGINE_DSN=dsn),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        yield proc, base
    finally:
        kill_all([proc])
        for pid in _seen:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        _seen.clear()


def _children(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children()


def _worker_pids(base: str) -> list[int]:
    try:
        pids: list[int] = httpx.get(f"{base}/workers", timeout=5).json()["pids"]
    except httpx.HTTPError:
        return []
    return pids


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def _wait_up(conn: Any, base: str) -> list[int]:
    pids = wait_until(lambda: len(_worker_pids(base)) == 2 and _worker_pids(base), what="app up")
    _seen.extend(pids)
    wait_until(lambda: idle_workers(conn, "wt") == 2, what="two idle workers beside the app")
    return list(pids)


def test_the_apps_workers_run_its_jobs_and_stop_with_it(
    app_server: tuple[subprocess.Popen[bytes], str], conn: Any
) -> None:
    proc, base = app_server
    pids = _wait_up(conn, base)
    assert sorted(pids) == sorted(p.pid for p in _children(proc))
    job_id = httpx.post(f"{base}/jobs", json={"hello": "beside"}, timeout=5).json()["id"]
    done = wait_until(
        lambda: (
            (r := httpx.get(f"{base}/jobs/{job_id}", timeout=5).json())["status"] == "succeeded"
            and r
        ),
        what="the job done by a worker beside the app",
    )
    assert done["result"] == {"echo": {"hello": "beside"}}
    claimed_pid = conn.execute(
        "SELECT w.pid FROM queue_engine.jobs j JOIN queue_engine.workers w"
        " ON w.id = j.claimed_by WHERE j.id = %s",
        (job_id,),
    ).fetchone()[0]
    assert claimed_pid in pids

    proc.send_signal(signal.SIGTERM)
    # uvicorn ends its graceful shutdown (the lifespan's exit included) by
    # raising the signal it caught again: -SIGTERM is its clean stop.
    assert proc.wait(60) in (0, -signal.SIGTERM)
    assert _gone(pids), "a worker outlived its app"
    states = conn.execute(
        "SELECT pid, state FROM queue_engine.workers WHERE pid = ANY(%s)", (pids,)
    ).fetchall()
    assert sorted(states) == sorted((pid, "stopped") for pid in pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_app_leaves_no_orphan_worker(
    app_server: tuple[subprocess.Popen[bytes], str], conn: Any
) -> None:
    proc, base = app_server
    pids = _wait_up(conn, base)
    proc.kill()
    proc.wait(10)
    # The kernel sends each worker SIGTERM when its parent dies: a graceful stop.
    wait_until(lambda: _gone(pids), what="the workers of a killed app to stop")
    wait_until(
        lambda: (
            conn.execute(
                "SELECT count(*) FROM queue_engine.workers WHERE pid = ANY(%s) AND state = 'stopped'",
                (pids,),
            ).fetchone()[0]
            == 2
        ),
        what="their rows marked stopped",
    )


def _stand_in(code: str) -> list[str]:
    """A child command that runs ``code`` (the worker's options land in its argv, unused)."""
    return [sys.executable, "-c", code]


def test_a_watchdog_exit_is_restarted_and_a_config_error_is_not() -> None:
    restarted = WorkerProcesses(
        {"q": 1},
        app="x",
        command=_stand_in("import sys; sys.exit(75)"),
        policy=RestartPolicy(base_delay_s=0.05, give_up_after=3),
    )
    broken = WorkerProcesses({"q": 1}, app="x", command=_stand_in("import sys; sys.exit(2)"))
    with restarted, broken:
        # Three quick crashes in the window: restarted twice, then given up.
        wait_until(lambda: restarted.given_up, what="the crash loop to be given up")
        wait_until(lambda: broken.given_up, what="the config error to end")
        assert not restarted.pids
        assert not broken.pids
    assert restarted.stop() == {"worker:q#1": [75, 75, 75]}
    assert broken.stop() == {"worker:q#1": [2]}


def test_a_worker_ignoring_sigterm_is_killed_after_the_stop_timeout(tmp_path: Path) -> None:
    # Each stand-in says it ignores SIGTERM by creating a file named for its pid.
    stubborn = WorkerProcesses(
        {"q": 2},
        app="x",
        stop_timeout_s=0.5,
        command=_stand_in(
            "import os, pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            f" pathlib.Path({str(tmp_path)!r}, str(os.getpid())).touch(); time.sleep(60)"
        ),
    )
    with stubborn:
        pids = stubborn.pids
        assert len(pids) == 2
        wait_until(
            lambda: all((tmp_path / str(pid)).exists() for pid in pids),
            what="both stand-ins to ignore SIGTERM",
        )
    assert stubborn.stop() == {"worker:q#1": [-9], "worker:q#2": [-9]}
    assert _gone(pids)


def test_a_missing_command_is_one_line() -> None:
    missing = WorkerProcesses({"q": 1}, app="x", command=["/nonexistent/queue-claim-worker"])
    with pytest.raises(ConfigError, match="cannot start /nonexistent/queue-claim-worker: "):
        missing.start()
    assert missing.pids == []
