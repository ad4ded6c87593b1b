"""The outage wait: a reconnect backoff is cut short once the server accepts connections again.

Before it, a daemon slept its whole backoff (up to ``QUEUE_ENGINE_RECONNECT_MAX_S``)
even when Postgres had been back for seconds. The rule, with an injected
ping, clock and wait (no server, no real waiting): a wait longer than one probe
interval pings first; a server that answers keeps the backoff whole (the
failure is of another kind, such as too many clients); one that does not is
pinged every interval and the wait ends at the first ping that finds it back.
The backoff itself (:func:`reconnect_backoff`) is held here too: doubling,
jittered, never past its cap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from support.timing import FakeTiming

from queue_engine.daemon.outage import (
    PROBE_INTERVAL_S,
    RECONNECT_JITTER,
    OutageProbe,
    reconnect_backoff,
)
from queue_engine.daemon.service import Service
from queue_engine.producer.retry import ExponentialBackoff


def pings(*answers: bool | None) -> Callable[[str], bool | None]:
    """A ping that gives ``answers`` in turn, then the last one forever."""
    it: Iterator[bool | None] = iter(answers)
    last: list[bool | None] = [answers[-1]]

    def ping(dsn: str) -> bool | None:
        assert dsn == "dsn"
        last[0] = next(it, last[0])
        return last[0]

    return ping


def test_a_short_wait_is_not_probed() -> None:
    t = FakeTiming(now=0.0)
    probe = OutageProbe("dsn", ping=pings(False))
    assert probe.wait(threading.Event(), PROBE_INTERVAL_S, wait=t.wait, clock=t.clock) is False
    assert t.waits == [PROBE_INTERVAL_S]
    assert probe.pings == 0


def test_a_server_that_answers_keeps_the_backoff_whole() -> None:
    # Too many clients, a bad password, a standby: retrying sooner only adds load.
    for answer in (True, None):
        t = FakeTiming(now=0.0)
        probe = OutageProbe("dsn", ping=pings(answer))
        assert probe.wait(threading.Event(), 8.0, wait=t.wait, clock=t.clock) is False
        assert t.waits == [8.0]
        assert probe.pings == 1


def test_a_server_back_since_the_last_ping_ends_the_next_wait_at_once() -> None:
    # The wait ran out while the server was down; the retry met it starting up
    # and failed; by the next wait's first ping it accepts connections. That
    # failure was the outage's last: retry now, not after the grown backoff.
    t = FakeTiming(now=0.0)
    probe = OutageProbe("dsn", ping=pings(False, False, False, True))
    assert probe.wait(threading.Event(), 2.5, wait=t.wait, clock=t.clock) is False
    assert t.waits == [1.0, 1.0, 0.5]
    assert probe.wait(threading.Event(), 10.0, wait=t.wait, clock=t.clock) is True
    assert t.waits == [1.0, 1.0, 0.5]  # no waiting at all
    assert probe.pings == 4
    # Back to normal: a failure with the server answering keeps its backoff.
    assert probe.wait(threading.Event(), 8.0, wait=t.wait, clock=t.clock) is False
    assert t.waits == [1.0, 1.0, 0.5, 8.0]


def test_the_wait_ends_at_the_first_ping_that_finds_the_server_back() -> None:
    t = FakeTiming(now=0.0)
    probe = OutageProbe("dsn", ping=pings(False, False, False, True))
    assert probe.wait(threading.Event(), 10.0, wait=t.wait, clock=t.clock) is True
    assert t.waits == [1.0, 1.0, 1.0]  # back after 3 s, not 10
    assert probe.pings == 4


def test_a_server_that_stays_down_is_pinged_every_interval_until_the_deadline() -> None:
    t = FakeTiming(now=0.0)
    probe = OutageProbe("dsn", ping=pings(False))
    assert probe.wait(threading.Event(), 3.5, wait=t.wait, clock=t.clock) is False
    assert t.waits == [1.0, 1.0, 1.0, 0.5]
    assert t.now == 3.5
    assert probe.pings == 4  # one at the start, one after each whole interval


def test_a_stop_ends_the_wait_without_another_ping() -> None:
    t = FakeTiming(now=0.0)
    event = threading.Event()

    def wait(ev: threading.Event, seconds: float) -> bool:
        t.wait(ev, seconds)
        ev.set()  # a stop request arrives during the first interval
        return True

    probe = OutageProbe("dsn", ping=pings(False))
    assert probe.wait(event, 10.0, wait=wait, clock=t.clock) is False
    assert t.waits == [1.0]
    assert probe.pings == 1


def test_another_threads_reconnect_ends_the_wait() -> None:
    t = FakeTiming(now=0.0)
    probe = OutageProbe("dsn", ping=pings(False))
    reconnected = iter([False, True])
    assert (
        probe.wait(
            threading.Event(),
            10.0,
            wait=t.wait,
            clock=t.clock,
            reconnected=lambda: next(reconnected),
        )
        is True
    )
    assert t.waits == [1.0, 1.0]
    assert probe.pings == 2  # the start, and after the first interval


@dataclass(frozen=True)
class Run:
    did_work: bool = False

    def log_fields(self) -> dict[str, object]:
        return {}


#: The database is back this long after the first failed run.
BACK_AT = 7.5


class Flaky(Service[Run]):
    """Fails while the database is down (before ``BACK_AT``), then succeeds and stops itself."""

    name = "flaky"

    def __init__(self, t: FakeTiming, **kwargs: object) -> None:
        super().__init__(  # type: ignore[arg-type]
            interval_s=1.0, stagger_s=0.0, timing=t.timing, **kwargs
        )
        self.attempts: list[float] = []

    def run_once(self) -> Run:
        self.attempts.append(self.timing.clock())
        if self.timing.clock() < BACK_AT:
            raise ConnectionError("down")
        self._stopping = True
        return Run()


def test_a_service_retries_within_a_probe_interval_of_the_server_coming_back() -> None:
    # Backoff 1, 2, 4, 8 s (no jitter): runs at 0, 1, 3, 7 fail; the server is back at 7.5.
    t = FakeTiming(now=0.0)
    probe = OutageProbe("dsn", ping=lambda dsn: t.now >= BACK_AT)
    service = Flaky(t, outage=probe)  # the fake's rand is 0.5: no jitter
    service._loop()
    # Without the probe the next run is at 15 (below); with it, within one interval of 7.5.
    assert service.attempts[:4] == [0.0, 1.0, 3.0, 7.0]
    assert BACK_AT <= service.attempts[-1] <= BACK_AT + PROBE_INTERVAL_S


def test_a_service_without_a_probe_waits_its_whole_backoff() -> None:
    t = FakeTiming(now=0.0)
    service = Flaky(t)
    service._loop()
    assert service.attempts == [0.0, 1.0, 3.0, 7.0, 15.0]


def test_the_reconnect_backoff_doubles_jitters_and_never_passes_its_cap() -> None:
    backoff = reconnect_backoff(0.5, 10.0)
    assert isinstance(backoff, ExponentialBackoff)
    assert [backoff.delay(n, rand=lambda: 0.5) for n in (1, 2, 3, 4, 5, 6)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        10.0,
    ]
    assert backoff.delay(3, rand=lambda: 0.0) == pytest.approx(2.0 * (1 - RECONNECT_JITTER))
    assert backoff.delay(3, rand=lambda: 1.0) == pytest.approx(2.0 * (1 + RECONNECT_JITTER))
    # At the cap the jitter only shortens: a promise such as "a heartbeat within the
    # watchdog interval" is stated as the cap.
    assert backoff.delay(40, rand=lambda: 1.0) == 10.0
    assert backoff.delay(10_000, rand=lambda: 0.0) == pytest.approx(10.0 * (1 - RECONNECT_JITTER))
    # A base above the cap starts at the cap instead of refusing.
    assert reconnect_backoff(60.0, 30.0).delay(1, rand=lambda: 0.5) == 30.0
