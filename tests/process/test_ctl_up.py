"""Contract of ``queue-ctl up`` with real processes.

A real ``queue-ctl up --dsn DSN --queue poison=2 --app poison_app`` runs an
orchestrator, a scheduler and two workers: enqueued jobs get done; a worker
killed with SIGKILL is restarted (a new pid, and the supervisor says why the
old one ended); SIGINT stops every child gracefully and ``up`` exits 0 with
no child left behind. A bad configuration is one line on stderr, exit 2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import psutil
import pytest
from support.ctl import queue_ctl
from support.up import alive, start_up
from support.up import cleanup as _cleanup
from support.up import read as _read
from support.up import wait as _wait
from support.up import workers as _workers

from queue_engine.producer.client import Client

APPS = Path(__file__).resolve().parent.parent / "worker_apps"


def _two_workers(up: psutil.Process, without: int = 0) -> set[int] | None:
    """The pids of the two workers once there are two (none of them ``without``)."""
    pids = _workers(up)
    return pids if len(pids) == 2 and without not in pids else None


def test_up_runs_jobs_restarts_a_killed_worker_and_stops_on_sigint(
    dsn: str, client: Client
) -> None:
    proc, up, out_file = _start_up(
        "--dsn",
        dsn,
        "--queue",
        "poison=2",
        "--app",
        "poison_app",
        QUEUE_ENGINE_HEARTBEAT_S="0.5",
        QUEUE_ENGINE_SHUTDOWN_GRACE_S="5",
    )
    seen: set[int] = set()

    def output() -> str:
        return _read(out_file)

    try:
        first = _wait("two workers", lambda: _two_workers(up))
        seen |= {c.pid for c in up.children()}
        ids = [
            client.enqueue("poison.ok", queue="poison", args={"sleep": 0.05}).id for _ in range(6)
        ]
        _wait(
            "the jobs to succeed",
            lambda: all(client.get(i).status == "succeeded" for i in ids),
        )

        victim = sorted(first)[0]
        os.kill(victim, signal.SIGKILL)
        replaced = _wait("a restarted worker", lambda: _two_workers(up, without=victim))
        seen |= {c.pid for c in up.children()}
        assert len(replaced - first) == 1
        assert "crashed: killed by SIGKILL, restarting in" in output()
        # The new worker works.
        more = [
            client.enqueue("poison.ok", queue="poison", args={"sleep": 0.05}).id for _ in range(4)
        ]
        _wait("more jobs", lambda: all(client.get(i).status == "succeeded" for i in more))
        # The new worker may not have run any of them: wait until it is up (its signal
        # handlers installed), or the SIGINT below could find it still importing.
        _wait("the new worker to start", lambda: output().count("worker.started") >= 3)

        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
        text = output()
        assert code == 0, text
        assert "all children stopped" in text
        for line in text.splitlines():
            if line.startswith("up") and " stopped: " in line:
                assert "exit 0 (OK)" in line, line
        assert "worker:poison#1 |" in text and "orchestrator" in text and "scheduler" in text
        assert alive(seen) == [], text
    finally:
        _cleanup(proc, up, out_file)


@pytest.mark.parametrize(
    "args",
    [
        ("--queue", "q=0", "--app", "x"),
        ("--queue", "q=1"),
        ("--config", "/nonexistent.toml"),
        ("--workers-json", '[{"queue": "q", "concurency": 2}]', "--app", "x"),
    ],
)
def test_up_bad_config_is_one_line_and_exit_2(args: tuple[str, ...]) -> None:
    done = queue_ctl("up", "--dsn", "dbname=never_used", *args)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("queue-ctl: error: ")
    assert done.stdout == ""


def _start_up(
    *args: str, **extra: str
) -> tuple[subprocess.Popen[bytes], psutil.Process, IO[bytes]]:
    return start_up(*args, **{"PYTHONPATH": str(APPS), **extra})


def test_up_runs_dataloaders_workers_json_and_notices_old_names_once(dsn: str) -> None:
    # WORKERS_JSON is read (not noticed); DL_HEARTBEAT_SEC is noticed by up alone,
    # not again by each of its four children.
    proc, up, out_file = _start_up(
        "--dsn",
        dsn,
        "--app",
        "poison_app",
        WORKERS_JSON='[{"queue": "poison", "concurrency": 2}]',
        DL_HEARTBEAT_SEC="5",
    )
    try:
        _wait("two workers", lambda: _two_workers(up))
        _wait("ready", lambda: "ready:" in _read(out_file))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        text = _read(out_file)
        assert "up | workers from WORKERS_JSON (dataloader's list): poison=2" in text
        notices = [line for line in text.splitlines() if "notice:" in line]
        assert notices == [
            "queue-ctl: notice: DL_HEARTBEAT_SEC is dataloader's name; queue-engine reads "
            "QUEUE_ENGINE_HEARTBEAT_S (queue-ctl migrate-settings --from dataloader)"
        ], text
    finally:
        _cleanup(proc, up, out_file)


def test_a_second_sigint_kills_the_children_and_exits_130(dsn: str, client: Client) -> None:
    proc, up, out_file = _start_up(
        "--dsn",
        dsn,
        "--queue",
        "poison=1",
        "--app",
        "poison_app",
        QUEUE_ENGINE_SHUTDOWN_GRACE_S="60",
    )
    try:
        job = client.enqueue("poison.ok", queue="poison", args={"sleep": 60})
        _wait("the job to run", lambda: client.get(job.id).status == "running")
        children = [c.pid for c in up.children()]
        proc.send_signal(signal.SIGINT)
        _wait("the stop to begin", lambda: "stopping: SIGTERM" in _read(out_file))
        time.sleep(0.5)
        assert proc.poll() is None, "up must wait for the running job's graceful stop"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, _read(out_file)
        assert alive(set(children)) == []
    finally:
        _cleanup(proc, up, out_file)


def test_an_app_that_does_not_import_stops_the_fleet_with_exit_2(dsn: str) -> None:
    proc, up, out_file = _start_up("--dsn", dsn, "--queue", "q=1", "--app", "no_such_app_module")
    try:
        code = proc.wait(60)
        text = _read(out_file)
        assert code == 2, text
        assert "exit 2 (USAGE): fix the command or the settings" in text
        assert "all children stopped" in text
    finally:
        _cleanup(proc, up, out_file)


def test_reload_restarts_the_workers_when_an_app_file_changes(dsn: str, tmp_path: Path) -> None:
    app_dir = tmp_path / "reload_app"
    app_dir.mkdir()
    (app_dir / "__init__.py").write_text(
        "from queue_engine import task\n\n@task('reload.noop', queue='r')\ndef noop(args, ctx):\n    return 1\n"
    )
    proc, up, out_file = _start_up(
        "--dsn",
        dsn,
        "--queue",
        "r=1",
        "--app",
        "reload_app",
        "--reload",
        PYTHONPATH=f"{tmp_path}{os.pathsep}{APPS}",
    )
    try:
        before = _wait("a worker", lambda: _workers(up))
        _wait("the worker to start", lambda: "worker.started" in _read(out_file))
        (app_dir / "helpers.py").write_text("X = 1\n")
        after = _wait("a new worker", lambda: (w := _workers(up)) and not (w & before) and w)
        assert len(after) == 1
        assert "files changed, restarting" in _read(out_file)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, _read(out_file)
    finally:
        _cleanup(proc, up, out_file)
