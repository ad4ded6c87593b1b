"""What every daemon shares: lifecycle, identity, start-up, heartbeat, signals, systemd.

- :mod:`~queue_engine.daemon.service` — :class:`Service`, the one lifecycle of
  every background service (start, run periodically, stop), and the
  :class:`Timing` (clock, wait, random) each is given;
- :mod:`~queue_engine.daemon.outage` — the reconnect backoff, cut short once
  the database accepts connections again;
- :mod:`~queue_engine.daemon.identity` — :func:`process_id`, the workers-table id;
- :mod:`~queue_engine.daemon.startup` — waiting for the database at start (one
  backoff, one deadline, exit 69);
- :mod:`~queue_engine.daemon.pooler` — refusing a transaction-pooling proxy;
- :mod:`~queue_engine.daemon.heartbeat` — the workers row, kept fresh (the
  one :class:`Heartbeat`, with the worker's tick cadence), with the host's
  load from :mod:`~queue_engine.daemon.telemetry`;
- :mod:`~queue_engine.daemon.signals` — first SIGTERM graceful, second exits 130;
- :mod:`~queue_engine.daemon.notify` — READY/STATUS/WATCHDOG/STOPPING, over
  the ``sd_notify`` protocol of :mod:`~queue_engine.daemon.systemd`;
- :mod:`~queue_engine.daemon.runtime` — :class:`DaemonRuntime`, which runs the
  above around a daemon's services and its foreground (read its docstring
  first): the orchestrator, the scheduler and the claim worker.

This package sits under the daemons (orchestrator, scheduler, worker) and
over the foundation and the producer API: it imports none of the daemons,
and nothing outside the daemons (and the faces above them) imports it.
"""

from __future__ import annotations

from queue_engine.daemon.heartbeat import (
    HEARTBEAT_DEFAULT_S,
    BeatTarget,
    Cadence,
    Heartbeat,
    HeartbeatResult,
    WorkersRow,
)
from queue_engine.daemon.identity import process_id
from queue_engine.daemon.notify import SystemdLink
from queue_engine.daemon.runtime import (
    CONNECT_RETRY_DEFAULT_S,
    DAEMON_ROLES,
    STOP_TIMEOUT_S,
    Component,
    DaemonRuntime,
    Hooks,
)
from queue_engine.daemon.signals import EXIT_INTERRUPTED, StopSignals
from queue_engine.daemon.startup import STARTUP_BACKOFF, StopRequested, wait_for_database

__all__ = [
    "CONNECT_RETRY_DEFAULT_S",
    "DAEMON_ROLES",
    "EXIT_INTERRUPTED",
    "HEARTBEAT_DEFAULT_S",
    "STARTUP_BACKOFF",
    "STOP_TIMEOUT_S",
    "BeatTarget",
    "Cadence",
    "Component",
    "DaemonRuntime",
    "Heartbeat",
    "HeartbeatResult",
    "Hooks",
    "StopRequested",
    "StopSignals",
    "SystemdLink",
    "WorkersRow",
    "process_id",
    "wait_for_database",
]
