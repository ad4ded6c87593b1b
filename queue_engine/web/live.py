"""The dashboard's one shared aggregator: fleet figures computed once, pushed to every browser.

Per-browser count queries on a big jobs table are the dashboard failure most
reported in the field (Oban Web, good_job, hexpm): ten open tabs polling
``count(*)`` every second make the dashboard the heaviest client of the
database. So one :class:`Aggregator` per ``queue-web`` process reads the
figures the engine already computes for ``queue-ctl stats`` and ``workers``
(:mod:`queue_engine.operator.stats`: index-backed slices, never the whole table), keeps
the latest :class:`FleetSnapshot` in memory, and tells every Server-Sent Events
client that a new one is there (:class:`Broadcaster`). Pages and fragments
render from the snapshot; a page view costs no statement at all.

When does it read? It LISTENs on the engine's channels (new jobs, controls,
heartbeat telemetry) and reads again soon after a notification, at most once
per ``min_gap_s``; with no notification it still reads every ``poll_s`` (jobs
finishing do not NOTIFY, and a notification can be lost across a reconnect).
:class:`RefreshPolicy` is that rule as a pure function of the clock.

It also keeps the last hour of samples per queue (:class:`History`) for the
overview's small charts; the samples are taken at most every
``sample_every_s`` so an hour is a few hundred points whatever the refresh rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.foundation.errors import QueueEngineError
from queue_engine.foundation.logs import log_event
from queue_engine.operator import stats

log = logging.getLogger("queue_engine.web.live")

Clock = Callable[[], float]

#: Seconds between two reads when nothing was notified.
POLL_DEFAULT_S = 10.0
#: Least seconds between two reads, however many notifications arrive.
MIN_GAP_DEFAULT_S = 1.0
#: Seconds of history the charts show.
HISTORY_WINDOW_S = 3600.0
#: Least seconds between two samples of the history.
SAMPLE_EVERY_DEFAULT_S = 10.0
#: Longest single wait on the socket, so ``stop`` is honoured within this.
WAIT_SLICE_S = 0.5
#: Wait after a failed read before the next try (the database may be down).
ERROR_BACKOFF_S = 5.0


# -- pure parts ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RefreshPolicy:
    """When the aggregator reads the figures again (pure: the clock is an argument)."""

    poll_s: float = POLL_DEFAULT_S
    min_gap_s: float = MIN_GAP_DEFAULT_S

    def __post_init__(self) -> None:
        if self.poll_s <= 0 or self.min_gap_s < 0 or self.min_gap_s > self.poll_s:
            raise ValueError("need poll_s > 0 and 0 <= min_gap_s <= poll_s")

    def due(self, now: float, last: float | None, notified: bool, watched: bool = True) -> bool:
        """True when a read is due: never read, a notification past the gap, or the poll.

        With nobody watching (no open event stream) notifications are ignored
        and only the poll reads: heartbeats notify every few seconds, and
        nobody needs sub-second figures then (the charts sample on the poll).
        """
        if last is None:
            return True
        elapsed = now - last
        return elapsed >= self.poll_s or (notified and watched and elapsed >= self.min_gap_s)

    def wait_s(self, now: float, last: float | None, notified: bool, watched: bool = True) -> float:
        """Seconds to wait before the next read is due (0: read now)."""
        if last is None:
            return 0.0
        target = last + (self.min_gap_s if notified and watched else self.poll_s)
        return max(0.0, target - now)


#: The per-queue figures a history sample keeps (names of :class:`stats.QueueStats` fields).
SAMPLED_FIELDS = ("queued", "running", "out_1m", "in_1m", "wait_p95_s", "run_p95_s")


@dataclass(frozen=True, slots=True)
class Sample:
    """One queue's figures at one moment (``at``: epoch seconds)."""

    at: float
    values: dict[str, float | None]


class History:
    """The last ``window_s`` of samples per queue, at most one every ``every_s``."""

    def __init__(
        self, *, window_s: float = HISTORY_WINDOW_S, every_s: float = SAMPLE_EVERY_DEFAULT_S
    ) -> None:
        if window_s <= 0 or every_s <= 0:
            raise ValueError("window_s and every_s must be > 0")
        self.window_s = window_s
        self.every_s = every_s
        self._samples: dict[str, deque[Sample]] = {}
        self._last_at: float | None = None

    def add(self, at: float, queues: Sequence[stats.QueueStats]) -> bool:
        """Record the queues' figures at ``at`` unless the last sample is too recent.

        Returns whether a sample was taken. Samples older than the window are
        dropped, and so is a queue with none left (it disappeared an hour ago).
        """
        if self._last_at is not None and at - self._last_at < self.every_s:
            return False
        self._last_at = at
        for q in queues:
            values = {name: _number(getattr(q, name)) for name in SAMPLED_FIELDS}
            self._samples.setdefault(q.queue, deque()).append(Sample(at, values))
        horizon = at - self.window_s
        for name in list(self._samples):
            samples = self._samples[name]
            while samples and samples[0].at < horizon:
                samples.popleft()
            if not samples:
                del self._samples[name]
        return True

    def seed(self, rows: Sequence[tuple[str, float, float]], name: str = "out_1m") -> int:
        """Fill the past from the database before the first sample: ``(queue, at, value)`` rows.

        Only ``name`` is known for those moments (the others stay None, and a
        chart skips them). Rows outside the window, or not older than the
        samples already taken, are ignored. Returns how many were kept.
        """
        if name not in SAMPLED_FIELDS:
            raise KeyError(f"{name!r} is not sampled")
        kept = 0
        for queue, at, value in sorted(rows, key=lambda r: r[1], reverse=True):
            samples = self._samples.setdefault(queue, deque())
            if samples and at >= samples[0].at:
                continue
            values: dict[str, float | None] = dict.fromkeys(SAMPLED_FIELDS)
            values[name] = float(value)
            samples.appendleft(Sample(at, values))
            kept += 1
        for queue in [q for q, samples in self._samples.items() if not samples]:
            del self._samples[queue]
        return kept

    def series(self, queue: str, name: str) -> list[tuple[float, float | None]]:
        """``(at, value)`` of one figure of one queue, oldest first."""
        if name not in SAMPLED_FIELDS:
            raise KeyError(f"{name!r} is not sampled; sampled: {', '.join(SAMPLED_FIELDS)}")
        return [(s.at, s.values.get(name)) for s in self._samples.get(queue, ())]

    def queues(self) -> list[str]:
        """Queues with at least one sample."""
        return sorted(self._samples)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def sparkline(
    points: Sequence[tuple[float, float | None]],
    *,
    width: float = 120.0,
    height: float = 28.0,
    span_s: float = HISTORY_WINDOW_S,
    end: float | None = None,
) -> str:
    """The ``points`` attribute of an SVG polyline drawing ``points`` over the last ``span_s``.

    x runs from ``end - span_s`` (left) to ``end`` (right; default: the last
    sample), y from 0 (bottom) to the largest value (top, with a 1 px margin).
    Missing values (None) are skipped. An empty string means nothing to draw.
    """
    known = [(at, v) for at, v in points if v is not None]
    if not known:
        return ""
    right = end if end is not None else known[-1][0]
    left = right - span_s
    shown = [(at, v) for at, v in known if at >= left]
    if not shown:
        return ""
    top = max(v for _, v in shown)
    scale = (height - 2) / top if top > 0 else 0.0
    coords = []
    for at, value in shown:
        x = (at - left) / span_s * width
        y = height - 1 - value * scale
        coords.append(f"{x:.1f},{y:.1f}")
    return " ".join(coords)


# -- the snapshot ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """What every page reads: the figures of the last successful read."""

    version: int
    taken_at: datetime | None
    queues: tuple[stats.QueueStats, ...] = ()
    workers: tuple[stats.WorkerRow, ...] = ()
    #: Why the last read failed (None: it worked); the page shows it instead of a traceback.
    error: str | None = None

    def queue(self, name: str) -> stats.QueueStats | None:
        """One queue's figures, or None."""
        return next((q for q in self.queues if q.queue == name), None)

    def totals(self) -> dict[str, int]:
        """Fleet totals for the header."""
        live = [w for w in self.workers if w.role == "worker" and w.liveness == "live"]
        return {
            "queued": sum(q.queued for q in self.queues),
            "delayed": sum(q.delayed for q in self.queues),
            "running": sum(q.running for q in self.queues),
            "failed_1h": sum(q.failed_1h + q.lost_1h for q in self.queues),
            "out_1m": sum(q.out_1m for q in self.queues),
            "workers_live": len(live),
            "workers_parked": sum(1 for w in live if w.state == "parked"),
        }

    def event(self) -> dict[str, Any]:
        """The small JSON document an SSE ``fleet`` event carries."""
        return {
            "version": self.version,
            "at": self.taken_at.isoformat() if self.taken_at else None,
            "error": self.error,
            **self.totals(),
        }


# -- fan-out to the event streams ------------------------------------------------


@dataclass(eq=False)
class Subscription:
    """One SSE client: an asyncio event set (from any thread) when a new snapshot exists."""

    loop: asyncio.AbstractEventLoop
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False


class Broadcaster:
    """Tells every subscribed event stream that the snapshot changed.

    Publishing comes from the aggregator's thread and subscribers live on
    the server's event loop, so a publish schedules ``Event.set`` on each
    subscriber's loop (thread-safe) instead of touching the event directly.
    A slow client just sees the latest snapshot when it gets to it: nothing
    queues up per client.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: set[Subscription] = set()

    def subscribe(self) -> Subscription:
        """A new subscription on the running event loop."""
        sub = Subscription(asyncio.get_running_loop())
        with self._lock:
            self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget a subscription (safe twice)."""
        with self._lock:
            self._subs.discard(sub)

    def publish(self, *, closing: bool = False) -> int:
        """Wake every subscriber; ``closing`` also tells them the stream ends. Returns how many."""
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            if closing:
                sub.closed = True
            with contextlib.suppress(RuntimeError):  # its loop already closed
                sub.loop.call_soon_threadsafe(sub.changed.set)
        return len(subs)

    def __len__(self) -> int:
        with self._lock:
            return len(self._subs)


# -- the aggregator thread ---------------------------------------------------------


Connect = Callable[[], psycopg.Connection[Any]]


class Aggregator:
    """Reads the fleet figures in one thread per process and publishes them.

    ``connect`` opens the (autocommit, ideally read-only) connection the
    aggregator LISTENs and reads on; ``clock`` is wall-clock seconds, injected
    so tests drive :meth:`run_once` and the history without waiting.
    """

    def __init__(
        self,
        connect: Connect,
        schema: str,
        *,
        policy: RefreshPolicy | None = None,
        history: History | None = None,
        clock: Clock = time.time,
    ) -> None:
        self._connect = connect
        self.schema = schema
        self.policy = policy or RefreshPolicy()
        self.history = history or History()
        self.clock = clock
        self.broadcaster = Broadcaster()
        self.channels = (
            queries.jobs_channel(schema),
            queries.controls_channel(schema),
            queries.telemetry_channel(schema),
        )
        self._snapshot = FleetSnapshot(version=0, taken_at=None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self.notified = False
        self.last_read: float | None = None
        self.seeded = False
        self._streams_ended = False

    @property
    def snapshot(self) -> FleetSnapshot:
        """The latest snapshot (a new object per read, so readers need no lock)."""
        return self._snapshot

    # lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (nothing when it runs already)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="qe-web-live", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the thread, end every event stream; safe twice and before ``start``."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
        self.broadcaster.publish(closing=True)
        self._drop()

    def end_streams(self) -> None:
        """End every event stream now and refuse new ones (the server is stopping).

        The server's graceful stop waits for open responses, and an event
        stream never ends by itself: without this, one open dashboard would
        hold a SIGTERM for minutes. Safe from a signal handler: it only sets a
        flag and schedules wake-ups on the subscribers' loops.
        """
        self._streams_ended = True
        self.broadcaster.publish(closing=True)

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` or :meth:`end_streams` was called."""
        return self._stop.is_set() or self._streams_ended

    # one read ------------------------------------------------------------------

    def read(self, conn: psycopg.Connection[Any]) -> FleetSnapshot:
        """Read the figures on ``conn``, record a sample, publish; returns the new snapshot."""
        queues = stats.queue_stats(conn, self.schema)
        workers = stats.workers(conn, self.schema)
        now = self.clock()
        self.history.add(now, queues)
        snap = FleetSnapshot(
            version=self._snapshot.version + 1,
            taken_at=datetime.fromtimestamp(now, UTC),
            queues=tuple(queues),
            workers=tuple(workers),
        )
        self._snapshot = snap
        self.last_read = now
        self.notified = False
        self.broadcaster.publish()
        return snap

    def run_once(self) -> FleetSnapshot:
        """Open the connection if needed and read once (what the loop calls)."""
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
            for channel in self.channels:
                self._conn.execute(
                    psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel))
                )
        if not self.seeded:
            self.seed(self._conn)
        return self.read(self._conn)

    def seed(self, conn: psycopg.Connection[Any]) -> int:
        """Draw the last hour's throughput from the finished jobs (once per process)."""
        with schema_errors(self.schema):
            rows = conn.execute(
                queries.query("dashboard_finished_per_minute", self.schema)
            ).fetchall()
        horizon = self.clock() - self.history.window_s
        # A minute's count is what a sample at the minute's end would have read as out_1m.
        points = [
            (str(q), float(m) + 60.0, float(n)) for q, m, n in rows if float(m) + 60 > horizon
        ]
        self.seeded = True
        return self.history.seed(points)

    def failed(self, exc: BaseException) -> FleetSnapshot:
        """Keep the last figures but say the read failed (the page shows why)."""
        old = self._snapshot
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        self._snapshot = FleetSnapshot(
            version=old.version + 1,
            taken_at=old.taken_at,
            queues=old.queues,
            workers=old.workers,
            error=reason,
        )
        self.broadcaster.publish()
        return self._snapshot

    # the loop ------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
                self._wait_for_next()
            except (psycopg.Error, QueueEngineError, OSError) as exc:
                log_event(log, logging.WARNING, "web.live_error", error=str(exc).splitlines()[0])
                self.failed(exc)
                self._drop()
                self._stop.wait(ERROR_BACKOFF_S)

    def _wait_for_next(self) -> None:
        conn = self._conn
        while not self._stop.is_set() and conn is not None:
            watched = len(self.broadcaster) > 0
            wait = self.policy.wait_s(self.clock(), self.last_read, self.notified, watched)
            if wait <= 0:
                return
            for _ in conn.notifies(timeout=min(wait, WAIT_SLICE_S), stop_after=1):
                self.notified = True
            if self.policy.due(self.clock(), self.last_read, self.notified, watched):
                return

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
