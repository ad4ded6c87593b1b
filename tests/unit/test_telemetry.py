"""Host telemetry without a GPU: nvidia-smi and rocm-smi parsing, absence, failures, timeouts.

The rocm-smi samples are written from the tool's documented ``--json`` output
(``rocm-smi --showuse --showmeminfo vram --json``: one ``cardN`` object per
GPU, every figure a string, memory in bytes); no AMD GPU is needed.

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
    NVIDIA_SMI_APPS_ARGS,
    NVIDIA_SMI_ARGS,
    ROCM_SMI_ARGS,
    GpuProbe,
    GpuProcess,
    GpuStats,
    HostUse,
    host_telemetry,
    load_average,
    parse_nvidia_smi,
    parse_nvidia_smi_apps,
    parse_rocm_smi,
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
    """An NVIDIA host: nvidia-smi on PATH, no rocm-smi."""
    return f"/usr/bin/{name}" if name == "nvidia-smi" else None


def no_nvml() -> None:
    return None


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
    probe = GpuProbe(runner=FakeRunner(TWO_GPUS, "4242, 2048\n"), which=on_path, nvml=no_nvml)
    doc = host_telemetry(probe)
    assert doc["gpu"] == [
        {
            "utilization_pct": 37.0,
            "memory_used_mib": 10240.0,
            "memory_total_mib": 81920.0,
            "vendor": "nvidia",
        },
        {
            "utilization_pct": 0.0,
            "memory_used_mib": 3.0,
            "memory_total_mib": 16384.0,
            "vendor": "nvidia",
        },
    ]
    assert doc["gpu_processes"] == [{"pid": 4242, "memory_used_mib": 2048.0}]
    load = doc["load"]
    assert load is not None and len(load) == 3 and all(x >= 0 for x in load)
    assert host_telemetry(None)["gpu"] is None
    absent = host_telemetry(GpuProbe(which=lambda name: None, nvml=no_nvml))
    assert absent["gpu"] is None and absent["gpu_processes"] is None


# -- rocm-smi ----------------------------------------------------------------------

#: Two cards as ``rocm-smi --showuse --showmeminfo vram --json`` prints them.
ROCM_TWO_CARDS = (
    '{"card0": {"GPU use (%)": "37", "VRAM Total Memory (B)": "68702699520", '
    '"VRAM Total Used Memory (B)": "10737418240"}, '
    '"card1": {"GPU use (%)": "0", "VRAM Total Memory (B)": "34342961152", '
    '"VRAM Total Used Memory (B)": "7028736"}}\n'
)
#: A card that cannot report its use, a system key, a warning line before the JSON,
#: and cards in an order where text sorting would put card10 before card2.
ROCM_ODD = (
    "WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status\n"
    '{"system": {"Driver version": "6.7.0"}, '
    '"card10": {"GPU use (%)": "5", "VRAM Total Memory (B)": "1048576", '
    '"VRAM Total Used Memory (B)": "524288"}, '
    '"card2": {"GPU use (%)": "N/A", "VRAM Total Memory (B)": "2097152"}}'
)


def test_parse_rocm_smi_json_sample() -> None:
    assert parse_rocm_smi(ROCM_TWO_CARDS) == [
        GpuStats(37.0, 10240.0, 65520.0, vendor="amd"),
        GpuStats(0.0, 6.7, 32752.0, vendor="amd"),
    ]
    assert parse_rocm_smi(ROCM_ODD) == [
        GpuStats(None, None, 2.0, vendor="amd"),
        GpuStats(5.0, 0.5, 1.0, vendor="amd"),
    ]
    assert parse_rocm_smi("{}") == []


@pytest.mark.parametrize(
    "output", ["", "ERROR: No AMD GPUs specified", "[1, 2]", '{"card0": '], ids=repr
)
def test_parse_rocm_smi_refuses_what_is_not_its_json(output: str) -> None:
    with pytest.raises(ValueError):
        parse_rocm_smi(output)


def test_a_rocm_host_is_probed_with_rocm_smi_only() -> None:
    runner = FakeRunner(ROCM_TWO_CARDS, "garbage")
    probe = GpuProbe(
        runner=runner, which=lambda n: "/opt/rocm/bin/rocm-smi" if n == "rocm-smi" else None
    )
    assert probe.enabled
    assert probe.probe() == parse_rocm_smi(ROCM_TWO_CARDS)
    assert runner.calls == [(["/opt/rocm/bin/rocm-smi", *ROCM_SMI_ARGS], 2.0)]
    assert probe.probe() is None  # a bad answer is "no GPU figures", never an error
    assert probe.processes() is None  # no per-process figure on ROCm


def test_a_host_with_both_tools_reports_every_gpu() -> None:
    runner = FakeRunner(TWO_GPUS, ROCM_TWO_CARDS)
    probe = GpuProbe(runner=runner, which=lambda n: f"/usr/bin/{n}", nvml=no_nvml)
    gpus = probe.probe()
    assert gpus is not None and [g.vendor for g in gpus] == ["nvidia", "nvidia", "amd", "amd"]


# -- per-process GPU memory ------------------------------------------------------------


def test_parse_compute_apps_sums_each_process_over_its_gpus() -> None:
    out = "4242, 2048\n77, [N/A]\n4242, 1024\n"
    assert parse_nvidia_smi_apps(out) == [GpuProcess(77, None), GpuProcess(4242, 3072.0)]
    assert parse_nvidia_smi_apps("") == []
    with pytest.raises(ValueError):
        parse_nvidia_smi_apps("4242, 2048, extra\n")


class FakeNvml:
    def __init__(self, *answers: list[GpuProcess] | Exception) -> None:
        self.answers = list(answers)

    def processes(self) -> list[GpuProcess]:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_per_process_memory_comes_from_nvml_and_falls_back_to_nvidia_smi() -> None:
    nvml = FakeNvml([GpuProcess(9, 100.0)], RuntimeError("NVML_ERROR_GPU_IS_LOST"))
    runner = FakeRunner("9, 50\n")
    probe = GpuProbe(runner=runner, which=on_path, nvml=lambda: nvml)
    assert probe.processes() == [GpuProcess(9, 100.0)]
    assert runner.calls == []  # NVML answered: no nvidia-smi run
    assert probe.processes() == [GpuProcess(9, 50.0)]  # NVML failed: nvidia-smi, for good
    assert runner.calls == [(["/usr/bin/nvidia-smi", *NVIDIA_SMI_APPS_ARGS], 2.0)]


def test_the_pynvml_reader_sums_each_process_over_the_gpus() -> None:
    """``_PynvmlReader`` on a stand-in for the ``pynvml`` module: the calls it makes, the sums."""
    from types import SimpleNamespace

    from queue_engine.daemon.telemetry import MIB, _PynvmlReader

    per_gpu = [
        [
            SimpleNamespace(pid=10, usedGpuMemory=512 * MIB),
            SimpleNamespace(pid=11, usedGpuMemory=None),
        ],
        [SimpleNamespace(pid=10, usedGpuMemory=256 * MIB)],
    ]
    inits: list[bool] = []
    module = SimpleNamespace(
        nvmlInit=lambda: inits.append(True),
        nvmlDeviceGetCount=lambda: len(per_gpu),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: per_gpu[handle],
    )
    reader = _PynvmlReader(module)
    assert reader.processes() == [GpuProcess(10, 768.0), GpuProcess(11, None)]
    assert reader.processes() == [GpuProcess(10, 768.0), GpuProcess(11, None)]
    assert inits == [True]  # initialised once


def test_per_process_memory_is_none_without_nvml_or_nvidia_smi() -> None:
    probe = GpuProbe(runner=FakeRunner(), which=lambda n: None, nvml=no_nvml)
    assert probe.processes() is None


def test_nvml_loader_without_pynvml_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from queue_engine.daemon import telemetry

    real_import = builtins.__import__

    def no_pynvml(name: str, *args: object, **kwargs: object) -> object:
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    assert telemetry.load_nvml() is None


# -- host CPU and memory ------------------------------------------------------------------


def test_host_cpu_and_memory_from_psutil() -> None:
    use = HostUse()
    first = use.read()
    assert first["cpu_pct"] is None  # nothing to compare with yet: no made-up 0 %
    total, used = first["mem_total_bytes"], first["mem_used_bytes"]
    assert isinstance(total, int) and isinstance(used, int) and 0 < used <= total
    second = use.read()
    assert isinstance(second["cpu_pct"], float) and 0.0 <= second["cpu_pct"] <= 100.0
    doc = host_telemetry(None, use)
    assert {"load", "cpu_pct", "mem_used_bytes", "mem_total_bytes", "gpu", "gpu_processes"} <= set(
        doc
    )


def test_load_average_without_os_support(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    def unsupported() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unsupported)
    assert load_average() is None


def test_gpu_figures_convert_mib_and_tolerate_bad_entries() -> None:
    from queue_engine.orchestrator.metrics import MIB, gpu_figures

    runner = FakeRunner("[N/A], 512, 1024\n", "")
    doc = host_telemetry(GpuProbe(runner=runner, which=on_path, nvml=no_nvml))
    assert gpu_figures(doc["gpu"][0]) == (None, 512 * MIB, 1024 * MIB)
    assert gpu_figures({"utilization_pct": 37, "memory_used_mib": "3"}) == (37.0, None, None)
    assert gpu_figures({"utilization_pct": True}) == (None, None, None)  # bool is not a number
    assert gpu_figures("garbage") == (None, None, None)


def test_telemetry_families_take_each_hosts_newest_figures() -> None:
    from queue_engine.orchestrator.metrics import telemetry_families

    gpu_new = [{"utilization_pct": 10.0, "memory_used_mib": 1.0, "memory_total_mib": 2.0}]
    gpu_old = [{"utilization_pct": 90.0, "memory_used_mib": 1.0, "memory_total_mib": 2.0}]
    rows = [  # as sql/metrics_telemetry.sql orders them: by host, newest first
        ("a1", "worker", "q", "a", 1.0, 100, 0.5, gpu_new, None, 10.0, 20.0),
        ("a2", "orchestrator", "", "a", None, None, 7.0, gpu_old, 55.0, 30.0, 40.0),
        ("b1", "scheduler", "", "b", 2.0, 200, None, None, 12.5, None, None),
        ("b2", "worker", "q", "b", 3.0, 300, 1.25, None, 99.0, 1.0, 2.0),
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
    # Each host's newest row that has the figure: a1 has no CPU % yet (its first beat).
    assert values["queue_engine_host_cpu_percent"] == {("a",): 55.0, ("b",): 12.5}
    assert values["queue_engine_host_memory_used_bytes"] == {("a",): 10.0, ("b",): 1.0}
    assert values["queue_engine_host_memory_total_bytes"] == {("a",): 20.0, ("b",): 2.0}
    assert values["queue_engine_host_gpu_utilization_percent"] == {("a", "0"): 10.0}
    assert values["queue_engine_host_gpu_memory_total_bytes"] == {("a", "0"): 2.0 * 1024 * 1024}
