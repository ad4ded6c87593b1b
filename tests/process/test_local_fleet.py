"""The local fleet: ``queue-ctl up`` with no DSN, and what other shells do beside it.

A real ``queue-ctl up`` (no DSN: its own embedded Postgres) runs a worker of
the demo app. Beside it, as a user in a second shell would:

- ``queue-ctl enqueue``/``status`` with no DSN find the fleet's database by
  themselves (and say so on stderr);
- ``queue-ctl demo`` with no DSN runs on the fleet's database and says so;
  before the fix it started an embedded server in the same folder, stopped
  the fleet's server and deleted its data;
- a second ``queue-ctl up`` with no DSN refuses with one line (exit 2) and
  leaves the first alone; ``demo --data-dir`` on the fleet's folder refuses too;
- the first fleet's jobs are all still there, done, and it still works.

And ``up`` notices its database is gone (the server killed): it stops its
processes and exits 69 with one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import IO

import psutil
import psycopg
import pytest
from support.ctl import RUNTIME_DIR_VARIABLE, ok, queue_ctl
from support.up import cleanup, read, start_up, wait

from queue_engine.foundation import localfleet

FLEET = ("--app", "queue_engine.demo.app", "--queue", "demo=1")


def _record() -> dict[str, object] | None:
    path = Path(os.environ[RUNTIME_DIR_VARIABLE]) / "local-fleet.json"
    return json.loads(path.read_text()) if path.exists() else None


def _exported_dsn(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("export QUEUE_ENGINE_DSN="):
            return line.removeprefix("export QUEUE_ENGINE_DSN=").strip("'")
    return None


def _start() -> tuple[subprocess.Popen[bytes], psutil.Process, IO[bytes], str]:
    proc, up, out = start_up(*FLEET)
    try:
        dsn = wait("up to print its DSN", lambda: _exported_dsn(read(out)))
        wait(
            "the fleet to be ready",
            lambda: "| ready: 3 processes up, schema queue_engine" in read(out),
        )
    except BaseException:
        cleanup(proc, up, out)
        raise
    return proc, up, out, dsn


def _statuses(dsn: str, ids: list[int]) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, status FROM queue_engine.jobs_all WHERE id = ANY(%s) ORDER BY id", [ids]
        ).fetchall()
    return [status for _, status in rows]


def _enqueue_without_dsn(n: int) -> list[int]:
    ids = []
    for i in range(n):
        done = queue_ctl("enqueue", "demo.hello", "--queue", "demo", "--args", f'{{"name": "{i}"}}')
        ids.append(int(ok(done).split()[0]))
        assert "using the local fleet's database (queue-ctl up, pid" in done.stderr
    return ids


def test_demo_and_a_second_up_beside_a_local_fleet_leave_its_database_alone() -> None:
    proc, up, out, dsn = _start()
    try:
        record = _record()
        assert record is not None and record["pid"] == proc.pid and record["dsn"] == dsn
        data_dir = Path(str(record["data_dir"]))

        ids = _enqueue_without_dsn(3)
        wait("the fleet to run them", lambda: _statuses(dsn, ids) == ["succeeded"] * 3)
        assert "succeeded" in ok(queue_ctl("status", str(ids[0])))

        demo = queue_ctl("demo", "--timeout", "60", timeout=120)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert "using the local fleet's database (queue-ctl up, pid" in demo.stdout

        again = queue_ctl("up", *FLEET, timeout=60)
        assert again.returncode == 2, again.stdout + again.stderr
        assert again.stderr.count("\n") == 1
        assert f"a local fleet is already running (queue-ctl up, pid {proc.pid}" in again.stderr

        taken = queue_ctl("demo", "--data-dir", str(data_dir), timeout=60)
        assert taken.returncode == 2, taken.stdout + taken.stderr
        assert "never stops a server it did not start" in taken.stderr

        # The first fleet is untouched: its server, its jobs, its work.
        assert proc.poll() is None, read(out)
        assert _statuses(dsn, ids) == ["succeeded"] * 3
        more = _enqueue_without_dsn(2)
        wait("the fleet to run more", lambda: _statuses(dsn, more) == ["succeeded"] * 2)
        assert "AdminShutdown" not in read(out)
        assert _record() == record

        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, read(out)
        assert _record() is None
        assert not data_dir.exists()
    finally:
        cleanup(proc, up, out)


def test_up_ends_with_one_line_when_its_database_is_gone() -> None:
    proc, up, out, _dsn = _start()
    try:
        record = _record()
        assert record is not None
        pid_file = Path(str(record["data_dir"])) / "postmaster.pid"
        server_pid = int(pid_file.read_text().split()[0])
        os.kill(server_pid, signal.SIGKILL)
        code = proc.wait(60)
        text = read(out)
        assert code == 69, text
        assert text.strip().splitlines()[-1] == (
            "queue-ctl: error: the fleet's embedded Postgres is gone: its server process "
            f"(pid {server_pid}) ended"
        )
        assert "all children stopped" in text
        assert _record() is None
    finally:
        cleanup(proc, up, out)


@pytest.mark.parametrize("command", ["enqueue demo.hello", "status 1"])
def test_with_no_fleet_and_no_dsn_a_command_still_says_it_cannot_connect(command: str) -> None:
    assert localfleet.find() is None
    done = queue_ctl(*command.split(), env={"PGHOST": "/nonexistent-socket-dir"})
    assert done.returncode == 69, done.stderr
    assert "local fleet" not in done.stderr
