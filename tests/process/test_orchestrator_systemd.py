"""``queue-orchestrator`` speaks the systemd notify protocol to a real socket.

The test plays systemd: it binds an AF_UNIX datagram socket, passes it as
``NOTIFY_SOCKET`` (with ``WATCHDOG_USEC``) to a real ``queue-orchestrator``
process, and reads what arrives: ``READY=1`` once migrated and registered, a
``STATUS=`` line naming the role (leader), repeated ``WATCHDOG=1`` pings from
the heartbeat, and ``STOPPING=1`` after SIGTERM, followed by exit 0. Without
``WATCHDOG_USEC`` no pings are sent. Waits are bounded; nothing is timed.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.orchestrators import WAIT_S, count_in, procs, role_of, spawn, stop, wait_for

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here


class NotifySocket:
    """The service manager's end: a bound datagram socket and everything received on it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.1)
        self.messages: list[str] = []

    def drain(self) -> list[str]:
        """Read every datagram waiting now; return all lines received so far."""
        while True:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                return self.lines()
            self.messages.append(data.decode())

    def lines(self) -> list[str]:
        return [line for m in self.messages for line in m.splitlines()]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def notify_socket() -> Iterator[NotifySocket]:
    # A short folder: AF_UNIX paths are limited to ~107 bytes, tmp_path can be longer.
    folder = Path(tempfile.mkdtemp(prefix="qe-sd-"))
    sock = NotifySocket(folder / "notify")
    yield sock
    sock.close()
    shutil.rmtree(folder, ignore_errors=True)


def test_ready_status_watchdog_and_stopping(
    dsn: str, conn, tmp_path: Path, notify_socket: NotifySocket, procs
) -> None:
    orch = spawn(
        dsn,
        tmp_path / "o.log",
        NOTIFY_SOCKET=str(notify_socket.path),
        WATCHDOG_USEC="1000000",  # ping every 0.5 s (half of it)
        QUEUE_ENGINE_HEARTBEAT_S="10",  # the watchdog, not this, sets the beat
    )
    procs.append(orch)
    wait_for("READY=1", lambda: "READY=1" in notify_socket.drain(), procs)
    wait_for(
        "STATUS=leader",
        lambda: any(x.startswith("STATUS=leader:") for x in notify_socket.drain()),
        procs,
    )
    assert role_of(conn, orch.pid) == "leader"
    wait_for("3 watchdog pings", lambda: notify_socket.drain().count("WATCHDOG=1") >= 3, procs)

    assert stop(orch) == 0
    lines = notify_socket.drain()
    assert "STOPPING=1" in lines
    assert lines.index("READY=1") < lines.index("STOPPING=1")
    assert all(
        line.split("=", 1)[0] in {"READY", "STATUS", "WATCHDOG", "STOPPING"} for line in lines
    )


def test_no_watchdog_pings_without_watchdog_usec(
    dsn: str, conn, tmp_path: Path, notify_socket: NotifySocket, procs
) -> None:
    log = tmp_path / "o.log"
    orch = spawn(dsn, log, NOTIFY_SOCKET=str(notify_socket.path), WATCHDOG_USEC="")
    procs.append(orch)
    wait_for("READY=1", lambda: "READY=1" in notify_socket.drain(), procs)
    wait_for("the leader role", lambda: role_of(conn, orch.pid) == "leader", procs)
    # Three heartbeats (each logged, debug) pass without a ping: the beats are the events
    # that would send one, so a slow machine waits longer instead of checking too early.
    beats = count_in(log, "heartbeat.run")
    wait_for("three heartbeats", lambda: count_in(log, "heartbeat.run") >= beats + 3, procs)
    assert "WATCHDOG=1" not in notify_socket.drain()
    assert stop(orch) == 0
    assert "STOPPING=1" in notify_socket.drain()


def test_a_standby_reports_its_role(
    dsn: str, conn, tmp_path: Path, notify_socket: NotifySocket, procs
) -> None:
    leader = spawn(dsn, tmp_path / "a.log")
    procs.append(leader)
    wait_for("A to lead", lambda: role_of(conn, leader.pid) == "leader", procs)
    standby = spawn(dsn, tmp_path / "b.log", NOTIFY_SOCKET=str(notify_socket.path))
    procs.append(standby)
    wait_for(
        "STATUS=standby",
        lambda: any(x.startswith("STATUS=standby:") for x in notify_socket.drain()),
        procs,
    )
    leader.kill()
    leader.wait(timeout=WAIT_S)
    wait_for(
        "STATUS=leader after take-over",
        lambda: any(x.startswith("STATUS=leader:") for x in notify_socket.drain()),
        [standby],
    )
    assert stop(standby) == 0


def test_the_heartbeat_pings_before_its_database_write_and_caps_its_backoff() -> None:
    """A database outage must not starve the watchdog: ping first, retry within the interval."""
    from queue_engine.daemon.heartbeat import Heartbeat, WorkersRow
    from queue_engine.daemon.outage import RECONNECT_JITTER

    pings: list[int] = []
    row = WorkersRow(
        "host=/nonexistent-qe-socket-dir connect_timeout=1",
        "queue_engine",
        worker_id="o-1",
        role="orchestrator",
        state=lambda: "standby",
    )
    beat = Heartbeat(
        row,
        interval_s=5.0,
        on_tick=lambda: pings.append(1),
        max_tick_s=5.0,
    )
    with pytest.raises(Exception):  # noqa: B017 - whichever error the failed connect raises
        beat.run_once()
    assert pings == [1]
    beat.consecutive_errors = 10
    assert beat.next_interval(None) == 5.0
    uncapped = Heartbeat(
        WorkersRow("", "queue_engine", worker_id="o-2", role="orchestrator", state=str),
        interval_s=5.0,
    )
    uncapped.consecutive_errors = 10
    # Uncapped, the shared service backoff: jittered below its 30 s cap, never past it.
    assert 30.0 * (1 - RECONNECT_JITTER) <= uncapped.next_interval(None) <= 30.0
