"""The systemd notify protocol (``sd_notify``), implemented directly.

Under ``Type=notify`` systemd passes ``NOTIFY_SOCKET``; a daemon sends
datagrams such as ``READY=1``, ``STATUS=...`` and ``WATCHDOG=1`` to it. The
protocol is a few lines, so it is written here rather than taken from a
library (the one on PyPI has not been maintained since 2017). Outside systemd
every call is a no-op, so daemons call it unconditionally.
"""

from __future__ import annotations

import os
import socket


class SystemdNotifier:
    """Send notifications to the service manager named by ``NOTIFY_SOCKET``, if any."""

    def __init__(self, socket_path: str | None = None) -> None:
        path = socket_path if socket_path is not None else os.environ.get("NOTIFY_SOCKET", "")
        if path.startswith("@"):  # abstract namespace
            path = "\0" + path[1:]
        self._address = path or None

    @property
    def enabled(self) -> bool:
        """True when running under a service manager that listens for notifications."""
        return self._address is not None

    def notify(self, *lines: str) -> bool:
        """Send ``KEY=value`` lines in one datagram; return whether it was sent."""
        if self._address is None:
            return False
        payload = "\n".join(lines).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            try:
                sock.connect(self._address)
                sock.sendall(payload)
            except OSError:
                return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """Tell systemd start-up is complete (``READY=1``)."""
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        """Set the one-line status shown by ``systemctl status``."""
        return self.notify(f"STATUS={text.splitlines()[0] if text else ''}")

    def watchdog(self) -> bool:
        """Ping the systemd watchdog (``WATCHDOG=1``)."""
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        """Tell systemd the service is shutting down (``STOPPING=1``)."""
        return self.notify("STOPPING=1")


def watchdog_interval_s(
    environ: dict[str, str] | None = None, pid: int | None = None
) -> float | None:
    """Return how often to ping the watchdog (half of ``WATCHDOG_USEC``), or None when unset.

    ``WATCHDOG_PID``, when set, names the process the watchdog is meant for;
    another process (a child, say) must not ping on its behalf.
    """
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and owner.isdigit() and int(owner) != (os.getpid() if pid is None else pid):
        return None
    return int(usec) / 1_000_000 / 2
