"""Host telemetry for heartbeats: CPU, RAM, load average and, when present, GPU use.

Operators size and place processes by what their hosts are doing, so every
heartbeat -- a worker's (``sql/worker_heartbeat.sql``) and an orchestrator's or
scheduler's (``sql/orchestrator_heartbeat.sql``) -- carries a small JSON
document (``workers.telemetry``, also published on ``<schema>.telemetry``):

- the host's CPU use in percent since the previous beat and its memory in use
  and in all (``psutil``, a core dependency; "in use" is total minus what the
  kernel could hand out at once, ``available``, not psutil's ``used``);
- the host's load average;
- each GPU's utilisation and memory: NVIDIA GPUs as ``nvidia-smi`` reports
  them, AMD GPUs as ``rocm-smi --json`` does (``vendor`` says which);
- the GPU memory of each compute process on the host (``gpu_processes``:
  pid and MiB), from NVML when ``pynvml`` (the ``nvml`` extra,
  ``nvidia-ml-py``) is importable, else from ``nvidia-smi
  --query-compute-apps``. ROCm has no such per-process figure in its CLI
  that holds across versions, so AMD hosts report none.

CPU % and RSS of the process itself have their own columns. One module for
every role, so the document has one shape wherever it comes from.

Nothing here may hurt the heartbeat: each GPU tool runs with a short timeout,
only when it is on ``PATH``, and is given up for good after a few failures in
a row (a broken driver would otherwise cost a timeout per beat); a missing
tool is "no GPU", never an error. The command runner, the PATH lookup and
NVML are injectable, so parsing, absence, failures and timeouts are
unit-tested on machines without a GPU.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import psutil

log = logging.getLogger("queue_engine.telemetry")

NVIDIA_SMI = "nvidia-smi"
#: One line per GPU: ``utilization.gpu, memory.used, memory.total`` (percent, MiB, MiB).
NVIDIA_SMI_ARGS = (
    "--query-gpu=utilization.gpu,memory.used,memory.total",
    "--format=csv,noheader,nounits",
)
#: One line per compute process and GPU: ``pid, used_memory`` (MiB).
NVIDIA_SMI_APPS_ARGS = (
    "--query-compute-apps=pid,used_memory",
    "--format=csv,noheader,nounits",
)
ROCM_SMI = "rocm-smi"
#: One JSON object, a key per card: ``GPU use (%)``, ``VRAM Total (Used) Memory (B)``.
ROCM_SMI_ARGS = ("--showuse", "--showmeminfo", "vram", "--json")
#: Seconds a GPU tool may take before the probe gives up on this beat.
GPU_TIMEOUT_S = 2.0
#: Consecutive failures after which the probe stops calling a tool.
GPU_MAX_FAILURES = 3
#: At most this many entries in ``gpu_processes`` (a busy host must not bloat every beat).
GPU_PROCESSES_MAX = 64
MIB = 1024 * 1024

#: Runs a command with a timeout and returns its stdout; raises on failure or timeout.
Runner = Callable[[Sequence[str], float], str]


def run_command(argv: Sequence[str], timeout_s: float) -> str:
    """The default :data:`Runner`: ``subprocess.run`` with a timeout, stdout as text."""
    # A fixed command found on PATH, no shell.
    done = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout


@dataclass(frozen=True, slots=True)
class GpuStats:
    """One GPU: utilisation in percent, memory in MiB, and whose tool reported it."""

    utilization_pct: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    vendor: str = "nvidia"


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process's GPU memory on this host (summed over the GPUs it uses), in MiB."""

    pid: int
    memory_used_mib: float | None


def _number(field: Any) -> float | None:
    # nvidia-smi prints "[N/A]" or "[Not Supported]" for a value a GPU cannot
    # report; rocm-smi prints "N/A" and gives every number as a string.
    try:
        return float(str(field).strip())
    except ValueError:
        return None


def parse_nvidia_smi(output: str) -> list[GpuStats]:
    """Parse ``--format=csv,noheader,nounits`` output: one ``util, used, total`` line per GPU.

    Raises ``ValueError`` on a line that does not have three fields (the output
    of some other command or version): better no GPU figures than wrong ones.
    """
    gpus: list[GpuStats] = []
    for line in output.splitlines():
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != 3:
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        util, used, total = (_number(f) for f in fields)
        gpus.append(GpuStats(util, used, total))
    return gpus


def parse_nvidia_smi_apps(output: str) -> list[GpuProcess]:
    """Parse ``--query-compute-apps=pid,used_memory`` output, summed per pid.

    A process using two GPUs has a line per GPU. Raises ``ValueError`` on a
    line that is not ``pid, MiB``. "No running processes found" is no line.
    """
    per_pid: dict[int, float | None] = {}
    for line in output.splitlines():
        if not line.strip() or line.strip().lower().startswith("no running"):
            continue
        fields = line.split(",")
        if len(fields) != 2:
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        pid = int(fields[0].strip())
        mib = _number(fields[1])
        known = per_pid.get(pid)
        per_pid[pid] = mib if known is None else (known if mib is None else known + mib)
    return [GpuProcess(pid, mib) for pid, mib in sorted(per_pid.items())]


def _card_number(key: str) -> int:
    return int(key[4:]) if key[4:].isdigit() else 1_000_000


def parse_rocm_smi(output: str) -> list[GpuStats]:
    """Parse ``rocm-smi --showuse --showmeminfo vram --json``: one ``cardN`` object per GPU.

    Each value is a string (``"GPU use (%)": "37"``, ``"VRAM Total Memory (B)"``,
    ``"VRAM Total Used Memory (B)"`` in bytes); a figure the card cannot report
    is ``"N/A"`` or missing and gives None. Text before the JSON (some versions
    print warnings on stdout) is skipped; keys that are not cards (``system``)
    are ignored. Raises ``ValueError`` when there is no JSON object.
    """
    start = output.find("{")
    if start < 0:
        raise ValueError("no JSON object in rocm-smi output")
    document, _ = json.JSONDecoder().raw_decode(output[start:])
    if not isinstance(document, dict):
        raise ValueError("rocm-smi output is not a JSON object")
    gpus: list[GpuStats] = []
    for key in sorted((k for k in document if k.startswith("card")), key=_card_number):
        card = document[key]
        if not isinstance(card, dict):
            continue
        used = _number(card.get("VRAM Total Used Memory (B)", ""))
        total = _number(card.get("VRAM Total Memory (B)", ""))
        gpus.append(
            GpuStats(
                _number(card.get("GPU use (%)", "")),
                None if used is None else round(used / MIB, 1),
                None if total is None else round(total / MIB, 1),
                vendor="amd",
            )
        )
    return gpus


class _Tool:
    """One command of a GPU tool: run with a timeout, parsed, given up after failures."""

    def __init__(
        self,
        binary: str | None,
        args: Sequence[str],
        *,
        runner: Runner,
        timeout_s: float,
        max_failures: int,
    ) -> None:
        self.binary = binary
        self.args = tuple(args)
        self.runner = runner
        self.timeout_s = timeout_s
        self.max_failures = max_failures
        self.failures = 0

    @property
    def enabled(self) -> bool:
        return self.binary is not None and self.failures < self.max_failures

    def run(self, parse: Callable[[str], Any]) -> Any:
        """The parsed output; None when absent, given up on, failing or unparsable."""
        if not self.enabled:
            return None
        assert self.binary is not None
        try:
            parsed = parse(self.runner([self.binary, *self.args], self.timeout_s))
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.failures += 1
            gave_up = self.failures >= self.max_failures
            log.log(
                logging.WARNING if gave_up else logging.DEBUG,
                "%s failed (%s: %s)%s",
                os.path.basename(self.binary),
                type(exc).__name__,
                exc,
                f"; {self.args[0]} telemetry is off for this process" if gave_up else "",
            )
            return None
        self.failures = 0
        return parsed


class Nvml(Protocol):
    """What the probe uses of ``pynvml`` (``nvidia-ml-py``): compute processes per GPU."""

    def processes(self) -> list[GpuProcess]:
        """Every compute process's GPU memory, summed per pid; raises on any NVML error."""
        ...


class _PynvmlReader:
    """NVML through ``pynvml``: initialised once, the per-process memory of every GPU."""

    def __init__(self, module: Any) -> None:
        self._nvml = module
        module.nvmlInit()

    def processes(self) -> list[GpuProcess]:
        nvml = self._nvml
        per_pid: dict[int, float | None] = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                # pynvml gives None for a figure NVML could not read (no permission).
                used = getattr(proc, "usedGpuMemory", None)
                mib = used / MIB if isinstance(used, int) else None
                known = per_pid.get(int(proc.pid))
                per_pid[int(proc.pid)] = (
                    mib if known is None else (known if mib is None else known + mib)
                )
        return [
            GpuProcess(pid, None if mib is None else round(mib, 1))
            for pid, mib in sorted(per_pid.items())
        ]


def load_nvml() -> Nvml | None:
    """NVML when ``pynvml`` imports and initialises (an NVIDIA driver is present), else None."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except Exception:  # ImportError, or a broken install: no NVML, never an error
        return None
    try:
        return _PynvmlReader(pynvml)
    except Exception as exc:  # NVMLError: no driver, no GPU
        log.debug("NVML unavailable: %s", exc)
        return None


class GpuProbe:
    """The host's GPUs: ``nvidia-smi`` and ``rocm-smi`` when on PATH, per-process memory.

    Every method returns None when there is nothing to report (no tool, a
    failing one, one given up on) and never raises.
    """

    def __init__(
        self,
        *,
        runner: Runner = run_command,
        which: Callable[[str], str | None] = shutil.which,
        timeout_s: float = GPU_TIMEOUT_S,
        max_failures: int = GPU_MAX_FAILURES,
        nvml: Callable[[], Nvml | None] = load_nvml,
    ) -> None:
        # Looked up once: a process does not gain or lose a GPU driver while it runs.
        nvidia, rocm = which(NVIDIA_SMI), which(ROCM_SMI)

        def tool(binary: str | None, args: Sequence[str]) -> _Tool:
            return _Tool(
                binary, args, runner=runner, timeout_s=timeout_s, max_failures=max_failures
            )

        self._nvidia = tool(nvidia, NVIDIA_SMI_ARGS)
        self._nvidia_apps = tool(nvidia, NVIDIA_SMI_APPS_ARGS)
        self._rocm = tool(rocm, ROCM_SMI_ARGS)
        self._load_nvml = nvml
        self._nvml: Nvml | None = None
        self._nvml_tried = False

    @property
    def enabled(self) -> bool:
        """True while the probe will still call a GPU tool."""
        return self._nvidia.enabled or self._rocm.enabled

    def probe(self) -> list[GpuStats] | None:
        """Read every GPU once; None when no tool answered (never raises)."""
        nvidia: list[GpuStats] | None = self._nvidia.run(parse_nvidia_smi)
        amd: list[GpuStats] | None = self._rocm.run(parse_rocm_smi)
        if nvidia is None and amd is None:
            return None
        return (nvidia or []) + (amd or [])

    def processes(self) -> list[GpuProcess] | None:
        """The GPU memory of each compute process on the host (NVIDIA only); None: unknown.

        NVML when it loads (looked up once, at the first call: importing it
        costs nothing on a host without ``pynvml``), else ``nvidia-smi
        --query-compute-apps``; an NVML error drops back to nvidia-smi for good.
        NVML calls are in-process library calls to the driver: they have no
        timeout of their own (the tools do), which is why any error, not only a
        slow answer, retires NVML for the process.
        """
        if not self._nvml_tried:
            self._nvml_tried = True
            self._nvml = self._load_nvml()
        if self._nvml is not None:
            try:
                return self._nvml.processes()[:GPU_PROCESSES_MAX]
            except Exception as exc:  # NVMLError and friends: fall back, never fail a beat
                log.debug("NVML failed (%s); using nvidia-smi for per-process memory", exc)
                self._nvml = None
        apps: list[GpuProcess] | None = self._nvidia_apps.run(parse_nvidia_smi_apps)
        return None if apps is None else apps[:GPU_PROCESSES_MAX]


def load_average() -> list[float] | None:
    """The host's 1, 5 and 15 minute load averages; None where the OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


class HostUse:
    """The host's CPU % since the previous reading and its memory in use and in all.

    psutil measures CPU use between two calls; the first reading of a process
    has nothing to compare with and gives None rather than a meaningless 0.
    """

    def __init__(self) -> None:
        self._primed = False

    def read(self) -> dict[str, Any]:
        """``{"cpu_pct": float | None, "mem_used_bytes": int | None, "mem_total_bytes": ...}``."""
        cpu: float | None = None
        used: int | None = None
        total: int | None = None
        with contextlib.suppress(Exception):  # an OS without the counters: no figures
            value = psutil.cpu_percent(interval=None)
            cpu = round(float(value), 1) if self._primed else None
            self._primed = True
        with contextlib.suppress(Exception):
            mem = psutil.virtual_memory()
            used, total = int(mem.total - mem.available), int(mem.total)
        return {"cpu_pct": cpu, "mem_used_bytes": used, "mem_total_bytes": total}


#: The process's reader (psutil keeps the CPU counters of the previous call per process).
HOST_USE = HostUse()


def host_telemetry(gpu: GpuProbe | None, host: HostUse | None = None) -> dict[str, Any]:
    """The heartbeat's telemetry document.

    ``{"load": [1m, 5m, 15m], "cpu_pct": .., "mem_used_bytes": .., "mem_total_bytes": ..,
    "gpu": [...] | null, "gpu_processes": [{"pid", "memory_used_mib"}] | null}``.
    """
    gpus = gpu.probe() if gpu is not None else None
    procs = gpu.processes() if gpu is not None and gpus else None
    return {
        "load": load_average(),
        **(host or HOST_USE).read(),
        "gpu": None if gpus is None else [asdict(g) for g in gpus],
        "gpu_processes": None if procs is None else [asdict(p) for p in procs],
    }
