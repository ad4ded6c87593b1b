"""The worker's host telemetry: re-exported from :mod:`queue_engine.telemetry`.

The probe and the document moved to a shared module when orchestrators and
schedulers started sending the same telemetry in their heartbeats; this module
keeps the worker's (and its users') import path working.
"""

from __future__ import annotations

from queue_engine.telemetry import (
    GPU_MAX_FAILURES,
    GPU_TIMEOUT_S,
    NVIDIA_SMI,
    NVIDIA_SMI_ARGS,
    GpuProbe,
    GpuStats,
    Runner,
    host_telemetry,
    load_average,
    parse_nvidia_smi,
    run_command,
)

__all__ = [
    "GPU_MAX_FAILURES",
    "GPU_TIMEOUT_S",
    "NVIDIA_SMI",
    "NVIDIA_SMI_ARGS",
    "GpuProbe",
    "GpuStats",
    "Runner",
    "host_telemetry",
    "load_average",
    "parse_nvidia_smi",
    "run_command",
]
