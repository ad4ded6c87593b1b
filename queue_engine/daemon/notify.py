"""READY, STATUS, WATCHDOG and STOPPING for a daemon, sent from one place.

:class:`~queue_engine.daemon.systemd.SystemdNotifier` speaks the protocol; this
class holds what a daemon decides about it, once:

- the watchdog ping interval, computed once from ``WATCHDOG_USEC`` (half of
  it, :func:`~queue_engine.daemon.systemd.watchdog_interval_s`), and only when a
  service manager listens (``NOTIFY_SOCKET``). The daemon's heartbeat ticks at
  least that often and asks :meth:`SystemdLink.ping_due` at every tick: a ping
  is due every half interval (a quarter of ``WatchdogSec``), a margin for a
  ping that waits on a health check. A heartbeat that ticks once per interval
  (the orchestrator's, the scheduler's) so pings at every tick; the worker's
  ticks four times a second and pings every half interval;
- ``STATUS=`` only when the text changed, so polling the status line is cheap.

Outside systemd every call is a no-op, so daemons call it unconditionally.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from queue_engine.daemon.systemd import SystemdNotifier, watchdog_interval_s

log = logging.getLogger("queue_engine.daemon")


class SystemdLink:
    """A daemon's notifications to its service manager (no-ops outside systemd)."""

    def __init__(
        self,
        notifier: SystemdNotifier | None = None,
        *,
        environ: dict[str, str] | None = None,
        pid: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.notifier = notifier or SystemdNotifier()
        #: Half of ``WatchdogSec``: the longest wait between ticks of the daemon's heartbeat;
        #: None when no watchdog is configured.
        self.ping_interval_s = watchdog_interval_s(environ, pid) if self.notifier.enabled else None
        self._clock = clock
        self._last_ping: float | None = None
        self._status_lock = threading.Lock()
        self._status_sent: str | None = None

    @property
    def enabled(self) -> bool:
        """True under a service manager that listens for notifications."""
        return self.notifier.enabled

    @property
    def watchdog_s(self) -> float | None:
        """``WatchdogSec`` (twice the ping interval); None without a watchdog."""
        return None if self.ping_interval_s is None else 2 * self.ping_interval_s

    def ready(self, status: str) -> None:
        """``READY=1`` with the current status line."""
        with self._status_lock:
            self._status_sent = status
        self.notifier.ready(status)

    def status(self, text: str) -> None:
        """``STATUS=text``, unless it is what was sent last."""
        with self._status_lock:
            if text == self._status_sent:
                return
            self._status_sent = text
        self.notifier.status(text)

    def ping_due(self) -> bool:
        """True under a watchdog when no ping was sent for half the ping interval."""
        interval = self.ping_interval_s
        if interval is None:
            return False
        last = self._last_ping
        return last is None or self._clock() - last >= interval / 2

    def ping(self) -> None:
        """``WATCHDOG=1`` when a watchdog is configured (the caller checked the daemon is healthy)."""
        if self.ping_interval_s is not None:
            self._last_ping = self._clock()
            self.notifier.watchdog()

    def stopping(self, status: str | None = None) -> None:
        """``STOPPING=1``, then the status line saying what the shutdown does."""
        self.notifier.stopping()
        if status:
            self.status(status)
