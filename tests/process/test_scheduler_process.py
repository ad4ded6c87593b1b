"""Contract: ``queue-scheduler`` processes enqueue every slot exactly once, with no gap while one lives.

Real processes against one database: two schedulers on an every-second schedule
enqueue each slot once with no gap; after ``kill -9`` of one the other keeps
every slot; a ``queue-ctl schedules`` change wakes a running scheduler through
NOTIFY (its poll is set far beyond the test's wait); ``--app`` syncs @periodic
declarations; SIGTERM exits 0 and marks the workers row stopped; exit codes 2
(usage/config) and 69 (database unreachable at start); a Postgres restart is
survived. Waits are bounded polls, never timed assertions.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
import support.orchestrators
from support.ctl import queue_ctl
from support.orchestrators import BIN, WAIT_S, procs

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here

Conn = psycopg.Connection[Any]
#: ``wait_for(what, predicate, procs)``: a scheduler killed with -9 by the test is no failure.
wait_for = partial(support.orchestrators.wait_for, killed_ok=True)


def spawn(
    procs: list[subprocess.Popen[bytes]], dsn: str, log: Path, *args: str, **env: str
) -> subprocess.Popen[bytes]:
    full_env = {
        **os.environ,
        "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
        "QUEUE_ENGINE_RECONNECT_MAX_S": "0.5",
        "QUEUE_ENGINE_SCHEDULER_POLL_S": "2",
        **env,
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "queue-scheduler"), "--dsn", dsn, "--log-level", "DEBUG", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
    procs.append(proc)
    return proc


def running_schedulers(conn: Conn) -> int:
    row = conn.execute(
        "SELECT count(*) FROM queue_engine.workers WHERE role = 'scheduler' AND state = 'running'"
    ).fetchone()
    return int(row[0]) if row else 0


def slots_of(conn: Conn, name: str) -> list[datetime]:
    rows = conn.execute(
        "SELECT (args->'_schedule'->>'slot')::timestamptz FROM queue_engine.jobs "
        "WHERE args->'_schedule'->>'schedule' = %s ORDER BY 1",
        (name,),
    ).fetchall()
    return [r[0].astimezone(UTC) for r in rows]


def assert_every_second_once(slots: list[datetime]) -> None:
    assert len(slots) == len(set(slots)), f"a slot was enqueued twice: {slots}"
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(slots)]
    assert all(g == 1.0 for g in gaps), f"gap in slots: {gaps}"


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=WAIT_S)


def test_two_schedulers_enqueue_every_second_once_and_survive_a_kill(
    dsn: str, conn: Conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    added = queue_ctl(
        "--dsn", dsn, "schedules", "add", "tick", "every 1s", "--task", "tick", "--queue", "sched"
    )
    assert added.returncode == 0, added.stderr
    a = spawn(procs, dsn, tmp_path / "a.log")
    b = spawn(procs, dsn, tmp_path / "b.log")
    wait_for("both schedulers running", lambda: running_schedulers(conn) == 2, procs)
    wait_for("3 slots", lambda: len(slots_of(conn, "tick")) >= 3, procs)
    before_kill = len(slots_of(conn, "tick"))
    a.kill()
    a.wait(10)
    wait_for(
        "4 more slots after kill -9", lambda: len(slots_of(conn, "tick")) >= before_kill + 4, procs
    )
    assert stop(b) == 0
    slots = slots_of(conn, "tick")
    assert_every_second_once(slots)
    # One row per slot in the ledger, each linked to its job.
    ledger = conn.execute(
        "SELECT count(*), count(DISTINCT job_id) FROM queue_engine.schedule_runs WHERE schedule = 'tick'"
    ).fetchone()
    assert ledger == (len(slots), len(slots))
    row = conn.execute(
        "SELECT state, stopped_at IS NOT NULL FROM queue_engine.workers WHERE pid = %s AND role = 'scheduler'",
        (b.pid,),
    ).fetchone()
    assert row == ("stopped", True)


def test_two_schedulers_for_six_seconds_leave_no_gap(
    dsn: str, conn: Conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    assert (
        queue_ctl("--dsn", dsn, "schedules", "add", "tick", "every 1s", "--task", "tick").returncode
        == 0
    )
    a = spawn(procs, dsn, tmp_path / "a.log")
    b = spawn(procs, dsn, tmp_path / "b.log")
    wait_for("6 slots", lambda: len(slots_of(conn, "tick")) >= 6, procs)
    assert stop(a) == 0
    assert stop(b) == 0
    assert_every_second_once(slots_of(conn, "tick"))


def test_queue_ctl_change_wakes_a_running_scheduler_through_notify(
    dsn: str, conn: Conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    # Without NOTIFY the scheduler would not re-read the table for 600 s.
    log = tmp_path / "s.log"
    proc = spawn(procs, dsn, log, QUEUE_ENGINE_SCHEDULER_POLL_S="600")
    wait_for("scheduler running", lambda: running_schedulers(conn) == 1, procs)
    # The schedule must be added while the ticker sleeps (its run logged) and the
    # listener listens (its first wait, begun after LISTEN, logged): else the ticker
    # would find the schedule without the NOTIFY this test is about.
    wait_for(
        "the ticker asleep and the listener listening",
        lambda: all(
            event in log.read_text() for event in ("scheduler.run", "scheduler_listener.run")
        ),
        procs,
    )
    assert (
        queue_ctl("--dsn", dsn, "schedules", "add", "fast", "every 1s", "--task", "t").returncode
        == 0
    )
    wait_for("a slot of the new schedule", lambda: slots_of(conn, "fast"), procs)
    assert queue_ctl("--dsn", dsn, "schedules", "disable", "fast").returncode == 0
    count = len(slots_of(conn, "fast"))
    assert (
        queue_ctl("--dsn", dsn, "schedules", "add", "other", "every 1s", "--task", "t").returncode
        == 0
    )
    wait_for("a slot of the second schedule", lambda: slots_of(conn, "other"), procs)
    # Disabled before "other" was added: at most the slot in flight when disabling.
    assert len(slots_of(conn, "fast")) <= count + 1
    assert stop(proc) == 0


def test_app_schedules_are_synced_and_listed(
    dsn: str, conn: Conn, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    (tmp_path / "sched_app.py").write_text(
        "from queue_engine import periodic, task\n"
        "\n"
        "@periodic('every 1s', queue='load.cbr', args={'source': 'cbr'}, tz='Europe/Moscow')\n"
        "@task('load_cbr')\n"
        "def load_cbr(args):\n"
        "    return None\n"
        "\n"
        "periodic('0 3 * * *', task='nightly', name='nightly-report', overlap='skip')\n",
        encoding="utf-8",
    )
    proc = spawn(procs, dsn, tmp_path / "s.log", "--app", "sched_app", PYTHONPATH=str(tmp_path))
    wait_for("a synced slot", lambda: slots_of(conn, "load_cbr"), procs)
    listed = queue_ctl("--dsn", dsn, "schedules", "list")
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert set(lines) == {"load_cbr", "nightly-report"}
    assert "code" in lines["load_cbr"] and "Europe/Moscow" in lines["load_cbr"]
    args = conn.execute(
        "SELECT queue, args FROM queue_engine.jobs WHERE task = 'load_cbr' LIMIT 1"
    ).fetchone()
    assert args is not None and args[0] == "load.cbr"
    assert args[1]["source"] == "cbr" and args[1]["_schedule"]["reason"] == "schedule"
    assert args[1]["_schedule"]["slot"].endswith("+03:00")
    assert stop(proc) == 0


def test_scheduler_survives_a_postgres_restart(
    dsn: str, conn: Conn, pg_server: Any, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    if pg_server.embedded is None:
        pytest.skip("needs the embedded server to restart it")
    assert (
        queue_ctl("--dsn", dsn, "schedules", "add", "tick", "every 1s", "--task", "t").returncode
        == 0
    )
    proc = spawn(procs, dsn, tmp_path / "s.log")
    wait_for("first slot", lambda: slots_of(conn, "tick"), procs)
    conn.close()
    pg_server.embedded.restart()
    with psycopg.connect(dsn, autocommit=True) as again:
        after = len(slots_of(again, "tick"))
        wait_for(
            "slots after the restart", lambda: len(slots_of(again, "tick")) >= after + 2, procs
        )
        assert proc.poll() is None
        assert stop(proc) == 0
        slots = slots_of(again, "tick")
    assert len(slots) == len(set(slots))
    assert "scheduler_listener.error" in (tmp_path / "s.log").read_text()  # the cut was seen


def test_exit_codes(dsn: str, tmp_path: Path) -> None:
    bad_schema = subprocess.run(
        [str(BIN / "queue-scheduler"), "--dsn", dsn, "--schema", "Bad-Name"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad_schema.returncode == 2
    assert len(bad_schema.stderr.strip().splitlines()) == 1
    (tmp_path / "bad_app.py").write_text(
        "from queue_engine import periodic\nperiodic('* * 32 * *', task='t')\n", encoding="utf-8"
    )
    bad_app = subprocess.run(
        [str(BIN / "queue-scheduler"), "--dsn", dsn, "--app", "bad_app"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert bad_app.returncode == 2
    assert "day-of-month field '32' out of range 1-31" in bad_app.stderr
    assert len(bad_app.stderr.strip().splitlines()) == 1
    unreachable = subprocess.run(
        [str(BIN / "queue-scheduler"), "--dsn", "postgresql://u:secret@127.0.0.1:1/db"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "QUEUE_ENGINE_CONNECT_RETRY_S": "0.5"},
    )
    assert unreachable.returncode == 69
    assert "secret" not in unreachable.stderr
    assert (
        unreachable.stderr.strip()
        .splitlines()[-1]
        .startswith("queue-scheduler: error: cannot connect")
    )


def test_waits_for_the_schema_and_stops_cleanly_meanwhile(
    empty_dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "s.log"
    proc = spawn(procs, empty_dsn, log)
    wait_for("the waiting message", lambda: "waiting for schema" in log.read_text(), procs)
    assert stop(proc) == 0


def test_systemd_notify_ready_status_watchdog_and_stopping(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(WAIT_S)
        proc = spawn(
            procs,
            dsn,
            tmp_path / "s.log",
            NOTIFY_SOCKET=path,
            WATCHDOG_USEC="1000000",  # ping at least every 0.5 s
            QUEUE_ENGINE_HEARTBEAT_S="10",
        )
        seen: list[str] = []

        def until(line: str) -> None:
            while line not in seen:
                seen.extend(sock.recv(4096).decode().splitlines())

        until("READY=1")
        until("WATCHDOG=1")
        assert any(s.startswith("STATUS=") for s in seen)
        proc.send_signal(signal.SIGTERM)
        until("STOPPING=1")
        assert proc.wait(WAIT_S) == 0
