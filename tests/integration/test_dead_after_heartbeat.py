"""``queue-ctl workers`` and ``stats`` count a worker dead after three of its heartbeats.

The dead-worker sweep has always flagged a worker after ``3 x
QUEUE_ENGINE_HEARTBEAT_S`` (unless ``QUEUE_ENGINE_DEAD_AFTER_S`` is set), but
the views used a fixed 30 s: with a 5 s heartbeat, a worker silent for 20 s was
dead to the orchestrator and live to ``queue-ctl workers``. Both now read the
rule from the settings table; this runs the real CLI against a real row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

CTL_BIN = Path(sys.executable).parent / "queue-ctl"
SILENT_S = 20  # dead under a 5 s heartbeat (15 s), live under the default 10 s (30 s)


def _workers(dsn: str, **env: str) -> dict[str, str]:
    """``queue-ctl workers --json`` under exactly ``env``: ``{worker id: liveness}``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}
    result = subprocess.run(
        [str(CTL_BIN), "--dsn", dsn, "workers", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    return {row["id"]: row["liveness"] for row in json.loads(result.stdout)}


def test_a_shorter_heartbeat_makes_a_silent_worker_dead_in_queue_ctl_workers(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(
        "INSERT INTO queue_engine.workers (id, role, queue, host, pid, state, heartbeat_at) "
        "VALUES ('w-silent', 'worker', 'a', 'host-1', 4242, 'running', "
        "now() - make_interval(secs => %s))",
        (SILENT_S,),
    )
    assert _workers(dsn)["w-silent"] == "live"
    assert _workers(dsn, QUEUE_ENGINE_HEARTBEAT_S="5")["w-silent"] == "dead"
    # An explicit threshold still wins over the heartbeat rule.
    both = {"QUEUE_ENGINE_HEARTBEAT_S": "5", "QUEUE_ENGINE_DEAD_AFTER_S": "60"}
    assert _workers(dsn, **both)["w-silent"] == "live"
