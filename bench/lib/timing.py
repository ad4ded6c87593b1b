"""CPU of processes, percentiles, and a loop paced at a rate.

On a machine shared with other work, wall time moves with everyone's load; the
CPU a process spent moves less, so the benches report both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator

import psutil


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of the live processes among ``pids`` (the gone ones count 0)."""
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def busy_seconds() -> float:
    """CPU seconds the whole machine spent busy, every core."""
    t = psutil.cpu_times()
    return float(sum(t)) - t.idle - getattr(t, "iowait", 0.0)


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0-100) of sorted ``values``: the smallest value with at
    least ``p`` % of them at or below it; NaN for none."""
    if not values:
        return float("nan")
    rank = max(1, min(len(values), math.ceil(p * len(values) / 100)))
    return values[rank - 1]


def paced(n: int, rate: float) -> Iterator[int]:
    """Yield 0 .. ``n`` - 1, the i-th at ``i / rate`` seconds after the first (open loop).

    A late step does not push the later ones back: the loop catches up, as
    producers at a fixed rate do.
    """
    start = time.monotonic()
    for i in range(n):
        pause = start + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        yield i
