"""Process identity: the id a daemon registers under in the workers table.

One function for every role, so the format is decided once. The id must be
unique per process *start*, not per pid: pids are reused across restarts
(often the same pid under systemd in a container), and an old row with the
same id would make a fresh process look like the dead one. Hence a random
suffix after ``host:pid``.

Formats (operators read them in ``queue-ctl workers`` and in log lines, so
they stay as they were):

- worker: ``host:pid:abc123``;
- any other role: ``<role>@host:pid:abc123`` (``orchestrator@db1:4242:9f00aa``).
"""

from __future__ import annotations

import os
import secrets
import socket

#: The role whose ids carry no ``<role>@`` prefix (the most numerous rows, named in every job event).
WORKER_ROLE = "worker"


def process_id(role: str, *, host: str | None = None, pid: int | None = None) -> str:
    """A workers-table id for this process in ``role``, unique per process start."""
    if not role or "@" in role or ":" in role:
        raise ValueError(f"invalid daemon role {role!r}")
    where = f"{host or socket.gethostname()}:{os.getpid() if pid is None else pid}"
    suffix = secrets.token_hex(3)
    if role == WORKER_ROLE:
        return f"{where}:{suffix}"
    return f"{role}@{where}:{suffix}"
