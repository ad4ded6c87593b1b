"""The outage probe's ping against real servers: up, a closed port, and an unparsable DSN."""

from __future__ import annotations

import threading
import time

from psycopg.conninfo import make_conninfo
from support.ports import free_port as closed_port

from queue_engine.daemon.outage import OutageProbe, server_accepts


def test_the_ping_tells_a_server_that_accepts_from_one_that_is_down(dsn: str) -> None:
    assert server_accepts(dsn) is True
    down = make_conninfo(dsn, host="127.0.0.1", port=closed_port())
    assert server_accepts(down) is False
    assert server_accepts("host=x =broken") is None


def test_a_wait_against_a_server_that_answers_is_the_backoff_whole(dsn: str) -> None:
    probe = OutageProbe(dsn)
    started = time.monotonic()
    assert probe.wait(threading.Event(), 1.5) is False
    assert time.monotonic() - started >= 1.4
    assert probe.pings == 1
