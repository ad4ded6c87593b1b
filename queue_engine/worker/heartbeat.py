"""The worker's heartbeat thread: lease renewal, progress writes, cancel detection.

Every ``heartbeat_s`` it runs one statement that beats the worker's row,
extends the lease of every job the worker holds and reads their
``cancel_requested`` flags. Between beats it ticks often (a fraction of a
second) to do two cheap things: write pending progress at most every
``progress_interval_s`` (so a handler reporting progress in a tight loop does
not cost a round trip per report), and, while a job runs, read notifications
already waiting on the socket (a cancel NOTIFY is seen within a tick, no round
trip). A held job whose own lease is short (``lease_ttl_s`` under three
heartbeats) shortens the period: the target says how often to beat
(``beat_period_s``), and the ticks shorten with it, so such a lease is renewed
about three times per TTL. The target may also lengthen it: a worker that
holds no job beats less often (:func:`~queue_engine.worker.renewal.idle_beat_s`),
and beats at the next tick once it holds one again if a beat is then overdue. Clock and wait are injectable (see :class:`~queue_engine.service.Service`),
so the cadence is unit-tested without sleeping.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from queue_engine.service import Clock, Service, Wait, event_wait, log_event

#: Seconds between ticks (at most; less when the heartbeat itself is shorter).
TICK_S = 0.25
#: Pending progress is written at most this often.
PROGRESS_INTERVAL_S = 0.5


class HeartbeatTarget(Protocol):
    """What the heartbeat drives: implemented by the worker, faked in tests."""

    def beat(self) -> None:
        """Run the heartbeat statement (worker row, leases, progress, cancel flags)."""
        ...

    def progress_pending(self) -> bool:
        """True when a handler reported progress that is not written yet."""
        ...

    def job_running(self) -> bool:
        """True while a handler executes (the main loop is not using the connection)."""
        ...

    def poll_notifications(self) -> None:
        """Handle notifications already received, without waiting."""
        ...


class SystemdTarget(Protocol):
    """An optional extra of a heartbeat target: called every tick."""

    def systemd_tick(self) -> None:
        """Send systemd the status and watchdog pings that are due (never raises)."""
        ...


class PeriodTarget(Protocol):
    """An optional extra of a heartbeat target: a beat period shorter than ``heartbeat_s``."""

    def beat_period_s(self) -> float:
        """Seconds from one beat to the next now (a held job's short lease shortens it)."""
        ...


@dataclass(frozen=True, slots=True)
class HeartbeatRun:
    """One tick: whether it beat."""

    beat: bool

    @property
    def did_work(self) -> bool:
        """Beats are routine: never logged at info."""
        return False

    def log_fields(self) -> dict[str, Any]:
        """``beat=True|False``."""
        return {"beat": self.beat}


class Heartbeat(Service[HeartbeatRun]):
    """Beats every ``heartbeat_s``, writes progress and polls for cancels in between."""

    name = "heartbeat"

    def __init__(
        self,
        target: HeartbeatTarget,
        *,
        heartbeat_s: float,
        progress_interval_s: float = PROGRESS_INTERVAL_S,
        clock: Clock = time.monotonic,
        wait: Wait = event_wait,
        logger: logging.Logger | None = None,
    ) -> None:
        super().__init__(
            interval_s=min(TICK_S, heartbeat_s),
            stagger_s=0.0,
            clock=clock,
            wait=wait,
            logger=logger or logging.getLogger("queue_engine.worker.heartbeat"),
        )
        self.target = target
        self.heartbeat_s = heartbeat_s
        self.progress_interval_s = progress_interval_s
        self._last_beat = clock()
        self._tick_s = self.interval_s
        self.consecutive_beat_errors = 0

    def run_once(self) -> HeartbeatRun:
        """One tick: talk to systemd, poll notifications if a job runs, then beat if due."""
        tick = getattr(self.target, "systemd_tick", None)
        if tick is not None:
            tick()
        if self.target.job_running():
            self.target.poll_notifications()
        now = self.clock()
        period_of = getattr(self.target, "beat_period_s", None)
        # The target's period may be shorter (a short lease) or longer (an idle worker).
        period = self.heartbeat_s if period_of is None else period_of()
        # A shortened period is ticked a few times over, so it is kept, not rounded up.
        self._tick_s = (
            self.interval_s if period >= self.heartbeat_s else min(self.interval_s, period / 4)
        )
        due = now - self._last_beat >= period or (
            now - self._last_beat >= self.progress_interval_s and self.target.progress_pending()
        )
        if due:
            # Advance first: a failing beat is retried at the next period,
            # not in a tight loop.
            self._last_beat = now
            try:
                self.target.beat()
            except Exception as exc:
                self.consecutive_beat_errors += 1
                log_event(
                    self.log,
                    logging.WARNING,
                    "heartbeat.failed",
                    error=f"{type(exc).__name__}: {exc}",
                    consecutive=self.consecutive_beat_errors,
                    retry_in_s=round(period, 3),
                )
                return HeartbeatRun(beat=False)
            self.consecutive_beat_errors = 0
        return HeartbeatRun(beat=due)

    def next_interval(self, result: HeartbeatRun | None) -> float:
        """The tick: at most ``TICK_S``, shorter while the beat period is short."""
        return self._tick_s if result is not None else super().next_interval(result)
