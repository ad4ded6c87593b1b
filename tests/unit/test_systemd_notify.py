"""sd_notify: datagrams reach a real AF_UNIX socket; no-op outside systemd."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from queue_engine.daemon.systemd import SystemdNotifier, watchdog_interval_s


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(2)
    yield path, sock
    sock.close()


def test_ready_status_watchdog_are_sent(listener: tuple[str, socket.socket]) -> None:
    path, sock = listener
    notifier = SystemdNotifier(path)
    assert notifier.enabled
    assert notifier.ready("claiming from load.cbr")
    assert sock.recv(4096) == b"READY=1\nSTATUS=claiming from load.cbr"
    assert notifier.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    assert notifier.status("idle\nsecond line dropped")
    assert sock.recv(4096) == b"STATUS=idle"
    assert notifier.stopping()
    assert sock.recv(4096) == b"STOPPING=1"


def test_abstract_namespace_socket() -> None:
    name = f"queue-engine-test-{id(object())}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(2)
    try:
        assert SystemdNotifier("@" + name).watchdog()
        assert sock.recv(100) == b"WATCHDOG=1"
    finally:
        sock.close()


def test_outside_systemd_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = SystemdNotifier()
    assert not notifier.enabled
    assert notifier.ready() is False


def test_vanished_socket_does_not_raise(tmp_path: Path) -> None:
    assert SystemdNotifier(str(tmp_path / "gone.sock")).watchdog() is False


def test_watchdog_interval_is_half_the_timeout() -> None:
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000"}, pid=10) == 15.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "10"}, pid=10) == 15.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "11"}, pid=10) is None
    assert watchdog_interval_s({}, pid=10) is None
    assert watchdog_interval_s({"WATCHDOG_USEC": "0"}, pid=10) is None
