"""A free local TCP port, for a server a test starts (queue-web, pgbouncer, metrics)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nothing listens on right now (bound, then released).

    Taken from the OS rather than fixed, so two test processes never collide;
    also the port a test points a client at to find nothing listening.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
