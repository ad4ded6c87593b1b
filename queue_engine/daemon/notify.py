"""READY, STATUS, WATCHDOG and STOPPING for a daemon, sent from one place.

:class:`~queue_engine.systemd.SystemdNotifier` speaks the protocol; this
class holds what a daemon decides about it, once:

- the watchdog ping interval, computed once from ``WATCHDOG_USEC`` (half of
  it, :func:`~queue_engine.systemd.watchdog_interval_s`), and only when a
  service manager listens (``NOTIFY_SOCKET``);
- the heartbeat cadence under a watchdog (:meth:`beat_interval_s`): the
  heartbeat is what pings, so it beats at least as often as a ping is due;
- ``STATUS=`` only when the text changed, so polling the status line is cheap.

Outside systemd every call is a no-op, so daemons call it unconditionally.
"""

from __future__ import annotations

import logging
import threading

from queue_engine.systemd import SystemdNotifier, watchdog_interval_s

log = logging.getLogger("queue_engine.daemon")


class SystemdLink:
    """A daemon's notifications to its service manager (no-ops outside systemd)."""

    def __init__(
        self,
        notifier: SystemdNotifier | None = None,
        *,
        environ: dict[str, str] | None = None,
        pid: int | None = None,
    ) -> None:
        self.notifier = notifier or SystemdNotifier()
        #: Seconds between ``WATCHDOG=1`` pings; None when no watchdog is configured.
        self.ping_interval_s = watchdog_interval_s(environ, pid) if self.notifier.enabled else None
        self._status_lock = threading.Lock()
        self._status_sent: str | None = None

    @property
    def enabled(self) -> bool:
        """True under a service manager that listens for notifications."""
        return self.notifier.enabled

    def beat_interval_s(self, heartbeat_s: float) -> float:
        """The heartbeat cadence: ``heartbeat_s``, shortened to the ping interval under a watchdog."""
        if self.ping_interval_s is None:
            return heartbeat_s
        return min(heartbeat_s, self.ping_interval_s)

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

    def ping(self) -> None:
        """``WATCHDOG=1`` when a watchdog is configured (the caller checked the daemon is healthy)."""
        if self.ping_interval_s is not None:
            self.notifier.watchdog()

    def stopping(self, status: str | None = None) -> None:
        """``STOPPING=1``, then the status line saying what the shutdown does."""
        self.notifier.stopping()
        if status:
            self.status(status)
