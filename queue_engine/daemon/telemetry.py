"""Host telemetry for heartbeats: load average and, when present, GPU use.

Operators size and place processes by what their hosts are doing, so every
heartbeat -- a worker's (``sql/worker_heartbeat.sql``) and an orchestrator's or
scheduler's (``sql/orchestrator_heartbeat.sql``) -- carries a small JSON
document (``workers.telemetry``, also published on ``<schema>.telemetry``): the
host's load average and, on hosts with an NVIDIA driver, each GPU's
utilisation and memory as ``nvidia-smi`` reports them. CPU % and RSS of the
process itself have their own columns. One module for every role, so the
document has one shape wherever it comes from.

Nothing here may hurt the heartbeat: the GPU probe runs ``nvidia-smi`` with a
short timeout, only when it is on ``PATH``, and gives up for good after a few
failures in a row (a broken driver would otherwise cost a timeout per beat).
The command runner is injectable, so parsing, absence, failures and timeouts
are unit-tested on machines without a GPU.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger("queue_engine.telemetry")

NVIDIA_SMI = "nvidia-smi"
#: One line per GPU: ``utilization.gpu, memory.used, memory.total`` (percent, MiB, MiB).
NVIDIA_SMI_ARGS = (
    "--query-gpu=utilization.gpu,memory.used,memory.total",
    "--format=csv,noheader,nounits",
)
#: Seconds nvidia-smi may take before the probe gives up on this beat.
GPU_TIMEOUT_S = 2.0
#: Consecutive failures after which the probe stops calling nvidia-smi.
GPU_MAX_FAILURES = 3

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
    """One GPU as nvidia-smi reports it: utilisation in percent, memory in MiB."""

    utilization_pct: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None


def _number(field: str) -> float | None:
    # nvidia-smi prints "[N/A]" or "[Not Supported]" for a value a GPU cannot report.
    try:
        return float(field.strip())
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
        gpus.append(GpuStats(*(_number(f) for f in fields)))
    return gpus


class GpuProbe:
    """``nvidia-smi`` when it is on PATH; None when absent, failing, or given up on."""

    def __init__(
        self,
        *,
        runner: Runner = run_command,
        which: Callable[[str], str | None] = shutil.which,
        timeout_s: float = GPU_TIMEOUT_S,
        max_failures: int = GPU_MAX_FAILURES,
    ) -> None:
        self._runner = runner
        self._timeout_s = timeout_s
        self._max_failures = max_failures
        # Looked up once: a process does not gain or lose a GPU driver while it runs.
        self._binary = which(NVIDIA_SMI)
        self._failures = 0

    @property
    def enabled(self) -> bool:
        """True while the probe will still call nvidia-smi."""
        return self._binary is not None and self._failures < self._max_failures

    def probe(self) -> list[GpuStats] | None:
        """Read every GPU once; None when there is no usable nvidia-smi (never raises)."""
        if not self.enabled:
            return None
        assert self._binary is not None
        try:
            gpus = parse_nvidia_smi(self._runner([self._binary, *NVIDIA_SMI_ARGS], self._timeout_s))
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self._failures += 1
            gave_up = self._failures >= self._max_failures
            log.log(
                logging.WARNING if gave_up else logging.DEBUG,
                "nvidia-smi failed (%s: %s)%s",
                type(exc).__name__,
                exc,
                "; GPU telemetry is off for this process" if gave_up else "",
            )
            return None
        self._failures = 0
        return gpus


def load_average() -> list[float] | None:
    """The host's 1, 5 and 15 minute load averages; None where the OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def host_telemetry(gpu: GpuProbe | None) -> dict[str, Any]:
    """The heartbeat's telemetry document: ``{"load": [1m, 5m, 15m], "gpu": [...] | null}``."""
    gpus = gpu.probe() if gpu is not None else None
    return {
        "load": load_average(),
        "gpu": None if gpus is None else [asdict(g) for g in gpus],
    }
