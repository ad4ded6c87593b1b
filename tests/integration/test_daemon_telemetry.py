"""Host telemetry in orchestrator and scheduler heartbeats, on a real database.

The shared daemon heartbeat (``daemon/heartbeat.py``, its ``WorkersRow`` target) merges the host's
load average and GPUs into the role's own telemetry document, stores it in
``workers.telemetry`` and publishes it on ``queue_engine.telemetry`` with the
worker payload's keys plus ``role``, in the one heartbeat statement. Beats are
driven with ``run_once`` (no threads, no sleeps); the GPU probe gets a fake
``nvidia-smi`` runner, since there is no GPU here.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pytest

from queue_engine.daemon.heartbeat import Heartbeat, WorkersRow
from queue_engine.daemon.telemetry import GpuProbe

SCHEMA = "queue_engine"
CHANNEL = "queue_engine.telemetry"
PAYLOAD_KEYS = {
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
ONE_GPU = "37, 10240, 81920\n"
ONE_GPU_DOC = [
    {
        "utilization_pct": 37.0,
        "memory_used_mib": 10240.0,
        "memory_total_mib": 81920.0,
        "vendor": "nvidia",
    }
]


def fake_gpu(*answers: str | BaseException) -> GpuProbe:
    """A probe whose nvidia-smi is 'on PATH' and answers (or raises) the given outputs in turn.

    Its GPU query answers in turn; the per-process query finds one process (pid 4242).
    """
    queue = list(answers)

    def runner(argv: Sequence[str], timeout_s: float) -> str:
        if any(a.startswith("--query-compute-apps") for a in argv):
            return "4242, 2048\n"
        answer = queue.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return GpuProbe(
        runner=runner,
        which=lambda name: f"/usr/bin/{name}" if name == "nvidia-smi" else None,
        nvml=lambda: None,
    )


def no_gpu() -> GpuProbe:
    """A probe on a host without nvidia-smi."""
    return GpuProbe(which=lambda name: None, nvml=lambda: None)


@pytest.fixture
def listener(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A second connection listening on the telemetry channel."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'LISTEN "{CHANNEL}"')
        yield conn


@pytest.fixture
def beats() -> Iterator[Callable[[Heartbeat], Heartbeat]]:
    """Register heartbeats so their connections are closed after the test."""
    made: list[Heartbeat] = []

    def keep(hb: Heartbeat) -> Heartbeat:
        made.append(hb)
        return hb

    yield keep
    for hb in made:
        assert isinstance(hb.target, WorkersRow)
        hb.target.db.reset()


def row_beat(dsn: str, role: str = "orchestrator", **kwargs: Any) -> Heartbeat:
    """The daemons' heartbeat writing a workers row of ``role``."""
    return Heartbeat(WorkersRow(dsn, SCHEMA, role=role, **kwargs))


def payloads(listener: psycopg.Connection[Any], n: int) -> list[dict[str, Any]]:
    """The next ``n`` telemetry notifications (bounded wait: they are sent before we read)."""
    got = [
        json.loads(note.payload)
        for note in listener.notifies(timeout=10, stop_after=n)
        if note.channel == CHANNEL
    ]
    assert len(got) == n, got
    return got


def stored(conn: Any, worker_id: str) -> tuple[str, dict[str, Any]]:
    row = conn.execute(
        "SELECT role, telemetry FROM queue_engine.workers WHERE id = %s", (worker_id,)
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def test_orchestrator_beat_stores_and_publishes_host_telemetry(
    dsn: str, conn: Any, listener: psycopg.Connection[Any], beats: Any
) -> None:
    hb = beats(
        row_beat(
            dsn,
            worker_id="orch-1",
            state=lambda: "standby",
            telemetry=lambda: {"version": "9.9", "sweep_s": 5.0},
            gpu=fake_gpu(ONE_GPU, ONE_GPU),
        )
    )
    hb.run_once()  # insert
    hb.run_once()  # upsert of the same row: publishes again
    docs = payloads(listener, 2)
    for doc in docs:
        assert set(doc) == PAYLOAD_KEYS
        assert (doc["worker_id"], doc["role"], doc["queue"], doc["host"]) == (
            "orch-1",
            "orchestrator",
            None,
            socket.gethostname(),
        )
        assert doc["rss"] > 0 and doc["cpu"] is not None
        assert len(doc["load"]) == 3 and all(x >= 0 for x in doc["load"])
        assert doc["gpu"] == ONE_GPU_DOC
        assert doc["gpu_processes"] == [{"pid": 4242, "memory_used_mib": 2048.0}]
        assert 0 < doc["mem_used"] <= doc["mem_total"]
        assert len(json.dumps(doc)) < 1000
    role, telemetry = stored(conn, "orch-1")
    assert role == "orchestrator"
    assert telemetry["version"] == "9.9" and telemetry["sweep_s"] == 5.0  # role keys kept
    assert telemetry["load"] == docs[-1]["load"]
    assert telemetry["gpu"] == ONE_GPU_DOC


def test_scheduler_beat_publishes_its_role_and_host_keys_win(
    dsn: str, conn: Any, listener: psycopg.Connection[Any], beats: Any
) -> None:
    hb = beats(
        row_beat(
            dsn,
            "scheduler",
            worker_id="sched-1",
            state=lambda: "running",
            # A role key named like a host key must not shadow the host's figures.
            telemetry=lambda: {"app": "demo", "load": "mine", "gpu": "mine"},
            gpu=no_gpu(),
        )
    )
    hb.run_once()
    (doc,) = payloads(listener, 1)
    assert set(doc) == PAYLOAD_KEYS
    assert (doc["worker_id"], doc["role"], doc["queue"]) == ("sched-1", "scheduler", None)
    assert isinstance(doc["load"], list) and len(doc["load"]) == 3
    assert doc["gpu"] is None
    role, telemetry = stored(conn, "sched-1")
    assert role == "scheduler"
    assert telemetry["app"] == "demo"
    assert telemetry["load"] == doc["load"] and telemetry["gpu"] is None


def test_a_failing_gpu_probe_does_not_stop_the_beat(
    dsn: str, conn: Any, listener: psycopg.Connection[Any], beats: Any
) -> None:
    hb = beats(
        row_beat(
            dsn,
            worker_id="orch-2",
            state=lambda: "leader",
            gpu=fake_gpu(subprocess.TimeoutExpired(["nvidia-smi"], 2.0), ONE_GPU),
        )
    )
    assert hb.run_once().state == "leader"
    hb.run_once()
    first, second = payloads(listener, 2)
    assert first["gpu"] is None  # timed out: no figures this beat
    assert second["gpu"] == ONE_GPU_DOC  # and back on the next
    assert stored(conn, "orch-2")[1]["gpu"] == ONE_GPU_DOC
