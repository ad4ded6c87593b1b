"""The orchestrator leader also prunes finished jobs and serves /metrics and /health.

A real ``queue-orchestrator`` process with ``--http-port``: /health answers 200
and says it leads, /metrics carries the queue gauges and the leader-service
counters, and an old succeeded job (with its events) is pruned by the leader
while a fresh one and an active one are kept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from support.orchestrators import BIN, WAIT_S, wait_for
from support.ports import free_port

from queue_engine import Client


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except OSError:
        return 0, ""


def test_leader_prunes_and_serves_metrics(dsn: str, conn: Any, tmp_path: Path) -> None:
    with Client(dsn) as client:
        old = client.enqueue("extras.old", queue="extras")
        fresh = client.enqueue("extras.fresh", queue="extras")
        active = client.enqueue("extras.active", queue="extras")
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'w', "
        "started_at = now() WHERE id = ANY(%s)",
        ([old.id, fresh.id],),
    )
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'succeeded', finished_at = now() - "
        "CASE WHEN id = %s THEN interval '1 hour' ELSE interval '0' END WHERE id = ANY(%s)",
        (old.id, [old.id, fresh.id]),
    )
    conn.execute(
        "INSERT INTO queue_engine.job_events (job_id, kind) VALUES (%s, 'note'), (%s, 'note')",
        (old.id, fresh.id),
    )
    port = free_port()
    env = {
        **os.environ,
        "QUEUE_ENGINE_SWEEP_S": "0.2",
        "QUEUE_ENGINE_ELECT_S": "0.2",
        "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
        "QUEUE_ENGINE_PRUNE_S": "0.2",
        "QUEUE_ENGINE_RETAIN_SUCCEEDED_S": "600",
    }
    log = tmp_path / "orchestrator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "queue-orchestrator"), "--dsn", dsn, "--http-port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:

        def leading_health() -> dict[str, Any] | None:
            status, body = _get(f"http://127.0.0.1:{port}/health")
            if status != 200:
                return None
            health: dict[str, Any] = json.loads(body)
            return health if health.get("leader") else None

        health = wait_for("/health to report a leader", leading_health, [proc])
        assert health["status"] == "ok"

        # jobs_all: the archiver may move the old job to jobs_archive (with its
        # events) before the pruner deletes it from there.
        def pruned() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM queue_engine.jobs_all WHERE id = %s", (old.id,)
            ).fetchone()
            return row is not None and row[0] == 0

        wait_for("the leader to prune the old job", pruned, [proc])
        remaining = {r[0] for r in conn.execute("SELECT id FROM queue_engine.jobs_all")}
        assert remaining == {fresh.id, active.id}
        events = {r[0] for r in conn.execute("SELECT job_id FROM queue_engine.job_events")}
        assert old.id not in events and fresh.id in events

        status, text = _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert "queue_engine_" in text
        assert 'queue="extras"' in text
        pruned_total = [
            line for line in text.splitlines() if line.startswith("queue_engine_pruned_jobs_total")
        ]
        assert pruned_total and float(pruned_total[0].split()[-1]) >= 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, log.read_text()
    assert _get(f"http://127.0.0.1:{port}/health")[0] == 0  # the server stopped with it
