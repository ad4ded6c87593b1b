"""Host telemetry without a GPU: nvidia-smi parsing, absence, failures, timeouts.

The probe (``queue_engine.daemon.telemetry``, shared by workers, orchestrators and
schedulers) gets its command runner and PATH lookup injected, so every branch
runs on any machine; the real ``os.getloadavg`` is used for the load average.
Also the metrics side: how a telemetry document becomes gauges, malformed
documents included.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

import pytest

from queue_engine.daemon.telemetry import (
    GPU_MAX_FAILURES,
    NVIDIA_SMI_ARGS,
    GpuProbe,
    GpuStats,
    host_telemetry,
    load_average,
    parse_nvidia_smi,
)

TWO_GPUS = "37, 10240, 81920\n0, 3, 16384\n"


class FakeRunner:
    """Records calls; answers with the queued outputs or raises the queued errors."""

    def __init__(self, *answers: str | BaseException) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> str:
        self.calls.append((list(argv), timeout_s))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def on_path(name: str) -> str | None:
    return f"/usr/bin/{name}"


def test_parse_sample_output() -> None:
    assert parse_nvidia_smi(TWO_GPUS) == [
        GpuStats(37.0, 10240.0, 81920.0),
        GpuStats(0.0, 3.0, 16384.0),
    ]
    assert parse_nvidia_smi("") == []


def test_parse_unsupported_values_as_none() -> None:
    assert parse_nvidia_smi("[N/A], 512, [Not Supported]\n") == [GpuStats(None, 512.0, None)]


def test_parse_refuses_unexpected_output() -> None:
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the driver")


def test_probe_runs_the_documented_query_with_a_timeout() -> None:
    runner = FakeRunner(TWO_GPUS)
    probe = GpuProbe(runner=runner, which=on_path, timeout_s=1.5)
    assert probe.probe() == parse_nvidia_smi(TWO_GPUS)
    assert runner.calls == [(["/usr/bin/nvidia-smi", *NVIDIA_SMI_ARGS], 1.5)]
    assert NVIDIA_SMI_ARGS == (
        "--query-gpu=utilization.gpu,memory.used,memory.total",
        "--format=csv,noheader,nounits",
    )


def test_absent_binary_is_skipped_without_running_anything() -> None:
    runner = FakeRunner()
    probe = GpuProbe(runner=runner, which=lambda name: None)
    assert not probe.enabled
    assert probe.probe() is None
    assert runner.calls == []


@pytest.mark.parametrize(
    "error",
    [
        subprocess.TimeoutExpired(["nvidia-smi"], 2.0),
        subprocess.CalledProcessError(9, ["nvidia-smi"]),
        FileNotFoundError("nvidia-smi"),
        PermissionError("nvidia-smi"),
    ],
)
def test_a_failing_or_hanging_probe_returns_none(error: BaseException) -> None:
    probe = GpuProbe(runner=FakeRunner(error, TWO_GPUS), which=on_path)
    assert probe.probe() is None
    assert probe.enabled  # one failure: try again next beat
    assert probe.probe() == parse_nvidia_smi(TWO_GPUS)


def test_probe_gives_up_after_repeated_failures() -> None:
    errors = [subprocess.TimeoutExpired(["nvidia-smi"], 2.0)] * GPU_MAX_FAILURES
    runner = FakeRunner(*errors)
    probe = GpuProbe(runner=runner, which=on_path)
    assert [probe.probe() for _ in range(GPU_MAX_FAILURES + 2)] == [None] * (GPU_MAX_FAILURES + 2)
    assert len(runner.calls) == GPU_MAX_FAILURES
    assert not probe.enabled


def test_a_success_resets_the_failure_count() -> None:
    garbage = "not, csv\n"
    answers: list[str | BaseException] = []
    for _ in range(3):
        answers += [garbage] * (GPU_MAX_FAILURES - 1) + [TWO_GPUS]
    probe = GpuProbe(runner=FakeRunner(*answers), which=on_path)
    results = [probe.probe() for _ in range(len(answers))]
    assert results.count(None) == 3 * (GPU_MAX_FAILURES - 1)
    assert probe.enabled


def test_host_telemetry_document() -> None:
    doc = host_telemetry(GpuProbe(runner=FakeRunner(TWO_GPUS), which=on_path))
    assert doc["gpu"] == [
        {"utilization_pct": 37.0, "memory_used_mib": 10240.0, "memory_total_mib": 81920.0},
        {"utilization_pct": 0.0, "memory_used_mib": 3.0, "memory_total_mib": 16384.0},
    ]
    load = doc["load"]
    assert load is not None and len(load) == 3 and all(x >= 0 for x in load)
    assert host_telemetry(None)["gpu"] is None
    assert host_telemetry(GpuProbe(which=lambda name: None))["gpu"] is None


def test_load_average_without_os_support(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    def unsupported() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unsupported)
    assert load_average() is None


def test_gpu_figures_convert_mib_and_tolerate_bad_entries() -> None:
    from queue_engine.orchestrator.metrics import MIB, gpu_figures

    doc = host_telemetry(GpuProbe(runner=FakeRunner("[N/A], 512, 1024\n"), which=on_path))
    assert gpu_figures(doc["gpu"][0]) == (None, 512 * MIB, 1024 * MIB)
    assert gpu_figures({"utilization_pct": 37, "memory_used_mib": "3"}) == (37.0, None, None)
    assert gpu_figures({"utilization_pct": True}) == (None, None, None)  # bool is not a number
    assert gpu_figures("garbage") == (None, None, None)


def test_telemetry_families_take_each_hosts_newest_figures() -> None:
    from queue_engine.orchestrator.metrics import telemetry_families

    gpu_new = [{"utilization_pct": 10.0, "memory_used_mib": 1.0, "memory_total_mib": 2.0}]
    gpu_old = [{"utilization_pct": 90.0, "memory_used_mib": 1.0, "memory_total_mib": 2.0}]
    rows = [  # as sql/metrics_telemetry.sql orders them: by host, newest first
        ("a1", "worker", "q", "a", 1.0, 100, 0.5, gpu_new),
        ("a2", "orchestrator", "", "a", None, None, 7.0, gpu_old),
        ("b1", "scheduler", "", "b", 2.0, 200, None, None),
        ("b2", "worker", "q", "b", 3.0, 300, 1.25, None),
    ]
    families = {f.name: f for f in telemetry_families(rows)}
    values = {
        name: {tuple(s.labels.values()): s.value for s in f.samples} for name, f in families.items()
    }
    assert values["queue_engine_worker_cpu_percent"] == {
        ("a1", "worker", "q", "a"): 1.0,
        ("b1", "scheduler", "", "b"): 2.0,
        ("b2", "worker", "q", "b"): 3.0,
    }
    assert values["queue_engine_host_load1"] == {("a",): 0.5, ("b",): 1.25}
    assert values["queue_engine_host_gpu_utilization_percent"] == {("a", "0"): 10.0}
    assert values["queue_engine_host_gpu_memory_total_bytes"] == {("a", "0"): 2.0 * 1024 * 1024}
