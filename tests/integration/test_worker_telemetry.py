"""Host telemetry in worker heartbeats: stored on the worker row, and published on NOTIFY
only when asked (``QUEUE_ENGINE_WORKER_TELEMETRY_NOTIFY=on``).

An in-process worker heartbeats every 0.5 s; with publishing on, a listener on
``queue_engine.telemetry`` receives its JSON payload, written by the same
heartbeat statement that stores it in ``workers.telemetry``; with it off (the
default) the listener receives nothing while the row is still updated. This machine has
no GPU (or no nvidia-smi), so ``gpu`` is null, as it is on any host without one.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import psycopg
from support.ctl import ok, queue_ctl
from support.workers import running_worker, wait_until

from queue_engine.operator import stats


def test_heartbeat_stores_and_publishes_host_telemetry(dsn: str, conn: Any) -> None:
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute('LISTEN "queue_engine.telemetry"')
        with running_worker(dsn, heartbeat_s=0.5, telemetry_notify="on") as worker:
            payloads = [
                json.loads(n.payload)
                for n in listener.notifies(timeout=10, stop_after=2)
                if n.channel == "queue_engine.telemetry"
            ]
            row = wait_until(
                lambda: conn.execute(
                    "SELECT telemetry FROM queue_engine.workers WHERE id = %s AND telemetry IS NOT NULL",
                    (worker.worker_id,),
                ).fetchone(),
                what="telemetry stored",
            )
    assert len(payloads) == 2
    for doc in payloads:
        assert set(doc) == {
            "worker_id",
            "role",
            "queue",
            "host",
            "cpu",
            "rss",
            "load",
            "gpu",
            "host_cpu",
            "mem_used",
            "mem_total",
            "gpu_processes",
        }
        assert 0 < doc["mem_used"] <= doc["mem_total"]
        assert (doc["worker_id"], doc["queue"], doc["host"]) == (
            worker.worker_id,
            "wt",
            socket.gethostname(),
        )
        assert doc["rss"] > 0 and doc["cpu"] is not None
        assert len(doc["load"]) == 3 and doc["load"][0] >= 0
        assert len(json.dumps(doc)) < 1000
    stored = row[0]
    assert set(stored) == {
        "load",
        "cpu_pct",
        "mem_used_bytes",
        "mem_total_bytes",
        "gpu",
        "gpu_processes",
    }
    assert len(stored["load"]) == 3
    # The first beat has no CPU window yet (null); the later ones carry the host's CPU %.
    assert stored["cpu_pct"] is None or 0 <= stored["cpu_pct"] <= 100
    (w,) = stats.workers(conn, "queue_engine")
    assert w.load_1m == stored["load"][0]
    assert w.host_memory == (stored["mem_used_bytes"], stored["mem_total_bytes"])


def test_telemetry_is_not_published_by_default(dsn: str, conn: Any) -> None:
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute('LISTEN "queue_engine.telemetry"')
        with running_worker(dsn, heartbeat_s=0.2) as worker:
            wait_until(
                lambda: conn.execute(
                    "SELECT 1 FROM queue_engine.workers WHERE id = %s AND telemetry IS NOT NULL",
                    (worker.worker_id,),
                ).fetchone(),
                what="telemetry stored",
            )
            received = list(listener.notifies(timeout=1.0))
    assert received == []


def test_workers_view_shows_the_load_and_the_hosts_cpu_and_memory(dsn: str, conn: Any) -> None:
    telemetry = {
        "load": [1.25, 0.5, 0.25],
        "cpu_pct": 37.4,
        "mem_used_bytes": 5 * 2**30,
        "mem_total_bytes": 16 * 2**30,
        "gpu": None,
    }
    conn.execute(
        "INSERT INTO queue_engine.workers (id, queue, host, pid, state, telemetry) VALUES "
        "('w-load', 'q', 'h1', 1, 'idle', %s), ('w-none', 'q', 'h2', 2, 'idle', NULL)",
        (json.dumps(telemetry),),
    )
    header, *lines = ok(queue_ctl("--dsn", dsn, "workers")).splitlines()
    assert header.split()[-6:] == ["LOAD", "HOST", "CPU%", "HOST", "MEM", "LIVENESS"]
    loads = {line.split()[0]: line.split()[-4:-1] for line in lines}
    assert loads == {"w-load": ["1.25", "37", "5.0/16.0G"], "w-none": ["-", "-", "-"]}
    docs = {w["id"]: w for w in json.loads(ok(queue_ctl("--dsn", dsn, "workers", "--json")))}
    assert docs["w-load"]["telemetry"] == telemetry
    assert docs["w-none"]["telemetry"] is None
