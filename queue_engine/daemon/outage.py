"""Waiting out a database outage: a reconnect backoff cut short once Postgres is back.

Every daemon retries a lost database after a capped, jittered backoff
(:func:`reconnect_backoff`, up to ``QUEUE_ENGINE_RECONNECT_MAX_S``).
The backoff is right when the server answers but fails (too many clients, a
bad password, a standby): retrying faster would only add load. While the
server is simply down it only delays recovery: after an outage of a few
seconds a daemon could sleep up to the whole cap after Postgres accepts
connections again.

:meth:`OutageProbe.wait` tells the two apart. At the start of a wait longer
than one probe interval it pings the server with libpq's ``PQping`` (what
``pg_isready`` does). If the server accepts connections, the failure was of
the other kind and the wait is the backoff as is. If it does not (no
response, or "starting up"/"shutting down"), the wait pings again every
:data:`PROBE_INTERVAL_S` and ends as soon as a ping says the server accepts
connections, so the daemon reconnects within about a second of Postgres
being back instead of after the rest of its backoff.

One exception to "a server that answers keeps the backoff": when the probe's
last ping found the server down, a wait whose first ping finds it accepting
connections ends at once. The server came back between the failed attempt
and this ping (the attempt met it starting up, or still refused): the
failure was the outage's last, not one of the other kind, and waiting out
the grown backoff would leave the daemon idle for up to the whole cap after
Postgres is back (an orchestrator was seen electing a leader 10 s late so).

What it costs, per waiting thread: one ping per second during an outage. A
ping of a stopped server is a refused TCP or Unix-socket connect (no server
process is involved); of a server starting up or shutting down, the
postmaster forks a process that answers "starting up", like any connection
attempt; the ping that finds the server back opens one session (with
authentication) and closes it. A ping is capped at :data:`PROBE_TIMEOUT_S`
(libpq's smallest ``connect_timeout``), so an unroutable host (packets
dropped) slows probing to one every ~2 s per host and delays a stop request
by at most that much.

The ping, the clock and the wait are injected, so the rule is unit-tested
without a server or real waiting.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from psycopg import pq
from psycopg.conninfo import make_conninfo

from queue_engine.producer.retry import ExponentialBackoff

#: Seconds between two pings while the server does not accept connections.
PROBE_INTERVAL_S = 1.0
#: ``connect_timeout`` of one ping (libpq rounds smaller values up to 2 s).
PROBE_TIMEOUT_S = 2


def server_accepts(dsn: str) -> bool | None:
    """Ping the server of ``dsn``: True if it accepts connections, False if not, None if unknown.

    ``None`` means libpq could not even try (an unparsable DSN): the caller
    keeps its plain backoff.
    """
    try:
        conninfo = make_conninfo(dsn, connect_timeout=PROBE_TIMEOUT_S)
    except Exception:  # an unparsable DSN: the reconnect itself reports it
        return None
    result = pq.PGconn.ping(conninfo.encode())
    if result == pq.Ping.OK:
        return True
    if result in (pq.Ping.REJECT, pq.Ping.NO_RESPONSE):
        return False
    return None


def _event_wait(event: threading.Event, seconds: float) -> bool:
    return event.wait(max(0.0, seconds))


@dataclass(slots=True)
class OutageProbe:
    """The wait between two reconnect attempts, ended early when the server comes back."""

    dsn: str
    interval_s: float = PROBE_INTERVAL_S
    ping: Callable[[str], bool | None] = field(default=server_accepts)
    #: Pings sent (for tests and for the cost figure in the docs).
    pings: int = 0
    #: The last ping found the server down (no response, starting up, shutting down).
    seen_down: bool = False

    def _ping(self) -> bool | None:
        self.pings += 1
        answer = self.ping(self.dsn)
        if answer is not None:
            self.seen_down = answer is False
        return answer

    def wait(
        self,
        event: threading.Event,
        seconds: float,
        *,
        wait: Callable[[threading.Event, float], bool] = _event_wait,
        clock: Callable[[], float] = time.monotonic,
        reconnected: Callable[[], bool] | None = None,
    ) -> bool:
        """Wait ``seconds``, until ``event`` is set, or until the server is back after an outage.

        Returns True when the wait ended early because the server accepts
        connections again (or ``reconnected()``: another thread of the
        process already has a working connection), False otherwise. A wait no
        longer than one probe interval is not probed: it is short already.
        """
        if seconds <= self.interval_s:
            wait(event, seconds)
            return False
        deadline = clock() + seconds
        was_down = self.seen_down
        first = self._ping()
        if first is True and was_down:
            return True  # back since the last ping: the failure was the outage's last
        if first is not False:
            # The server answers (or we cannot tell): this backoff is for a
            # failure of another kind, and is kept whole.
            wait(event, seconds)
            return False
        while True:
            remaining = deadline - clock()
            if remaining <= 0 or event.is_set():
                return False
            if wait(event, min(self.interval_s, remaining)) or event.is_set():
                return False
            if reconnected is not None and reconnected():
                return True
            if clock() >= deadline:
                return False
            if self._ping() is True:
                return True


#: Jitter of every reconnect and error backoff: processes that lost the database
#: together (a Postgres restart) come back spread over ±30 % instead of at once.
RECONNECT_JITTER = 0.3


@dataclass(frozen=True, slots=True)
class ReconnectBackoff(ExponentialBackoff):
    """An :class:`ExponentialBackoff` that never waits longer than ``max_s``, jitter included.

    The delay before trying the database (or a failed run) again: a daemon's
    liveness promises, such as a heartbeat within the systemd watchdog
    interval, are stated as that cap, so the jitter spreads delays below it and
    never past it.
    """

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after ``attempt`` failures in a row (1-based), at most ``max_s``."""
        return min(self.max_s, ExponentialBackoff.delay(self, attempt, rand))


def reconnect_backoff(
    base_s: float, max_s: float, *, jitter: float = RECONNECT_JITTER
) -> ReconnectBackoff:
    """The one reconnect/error backoff: ``base_s`` doubling per failure, ±``jitter``, at most ``max_s``.

    A ``base_s`` above ``max_s`` (a slow service with a short cap) starts at the cap.
    """
    return ReconnectBackoff(
        base_s=float(min(base_s, max_s)), factor=2.0, max_s=float(max_s), jitter=jitter
    )
