"""Turning figures into HTML: the Jinja2 environment of the dashboard and its filters.

The filters are the same short forms ``queue-ctl`` prints (``format_duration``,
``format_bytes``), so a number reads the same in a terminal and on a page.
Autoescape is on for every template: job arguments, results and errors are
user data and are only ever shown as text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from queue_engine import stats
from queue_engine.web import live

#: Chart size on the overview (px).
SPARK_WIDTH = 104
SPARK_HEIGHT = 26


def _now() -> datetime:
    return datetime.now(UTC)


def num(value: int | float | None) -> str:
    """Thousands separated (``1 234 567``): big depths stay readable at a glance."""
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}".replace(",", " ")
    return f"{int(value):,}".replace(",", " ")


def dur(seconds: float | None) -> str:
    """A duration as ``queue-ctl`` prints it (``850ms``, ``12.3s``, ``4m05s``); — when unknown."""
    return "—" if seconds is None else stats.format_duration(seconds)


def stamp(value: datetime | None) -> str:
    """An absolute UTC time, to the second."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def clock(value: datetime | None) -> str:
    """Time of day only (timelines, "read at")."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%H:%M:%S")


def ago(value: datetime | None, suffix: str = " ago", now: datetime | None = None) -> str:
    """How long ago, short (``4m05s ago``)."""
    if value is None:
        return "—"
    seconds = ((now or _now()) - value).total_seconds()
    return stats.format_duration(max(0.0, seconds)) + suffix


def until(value: datetime | None, now: datetime | None = None) -> str:
    """How long until a future moment (``in 4m05s``), or ``due`` when it passed."""
    if value is None:
        return "—"
    seconds = (value - (now or _now())).total_seconds()
    return "due" if seconds <= 0 else "in " + stats.format_duration(seconds)


def pretty(value: Any) -> str:
    """Indented JSON for args and results."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def waited(job: Any) -> float | None:
    """Seconds between available and started (None before the start)."""
    started, available = job.started_at, job.available_at
    if started is None or available is None:
        return None
    return max(0.0, float((started - available).total_seconds()))


def ran(job: Any) -> float | None:
    """Run time: the recorded duration, else (running) time since the start."""
    if getattr(job, "duration_ms", None) is not None:
        return float(job.duration_ms) / 1000.0
    started = job.started_at
    if started is not None and job.status == "running":
        return max(0.0, float((_now() - started).total_seconds()))
    return None


def gpu(worker: stats.WorkerRow) -> str:
    """GPU utilisation and memory from the heartbeat telemetry (``telemetry.GpuStats``), if any."""
    gpus = (worker.telemetry or {}).get("gpu")
    if not isinstance(gpus, list) or not gpus:
        return "—"
    parts = []
    for g in gpus:
        if not isinstance(g, dict):
            continue
        util = g.get("utilization_pct")
        used, total = g.get("memory_used_mib"), g.get("memory_total_mib")
        text = f"{util:.0f}%" if isinstance(util, int | float) else "?%"
        if isinstance(used, int | float) and isinstance(total, int | float) and total:
            text += f" {used / 1024:.1f}/{total / 1024:.1f} GiB"
        parts.append(text)
    return ", ".join(parts) or "—"


def progress_of(value: Any) -> dict[str, Any] | None:
    """What a job's progress document says, as text and (when it has one) a 0..1 fraction."""
    if value is None:
        return None
    fraction = None
    if isinstance(value, dict):
        done, total = value.get("done", value.get("current")), value.get("total")
        if isinstance(value.get("fraction"), int | float):
            fraction = float(value["fraction"])
        elif isinstance(value.get("percent"), int | float):
            fraction = float(value["percent"]) / 100.0
        elif isinstance(done, int | float) and isinstance(total, int | float) and total > 0:
            fraction = float(done) / float(total)
    elif isinstance(value, int | float):
        fraction = float(value) if value <= 1 else float(value) / 100.0
    if fraction is not None:
        fraction = min(1.0, max(0.0, fraction))
    text = json.dumps(value, separators=(", ", ": "), sort_keys=True, default=str)
    return {"text": text, "fraction": fraction}


def spark_data(
    points: list[tuple[float, float | None]], css: str = "", end: float | None = None
) -> dict[str, Any] | None:
    """What the ``spark`` macro draws: the polyline, its box and a label; None: no sample yet."""
    line = live.sparkline(points, width=SPARK_WIDTH, height=SPARK_HEIGHT, end=end)
    if not line:
        return None
    top = max((v for _, v in points if v is not None), default=0.0)
    return {
        "points": line,
        "css": css,
        "width": SPARK_WIDTH,
        "height": SPARK_HEIGHT,
        "label": f"last hour, max {num(top)}",
    }


def environment() -> Environment:
    """The dashboard's Jinja2 environment (templates shipped inside the package)."""
    folder = resources.files("queue_engine.web").joinpath("templates")
    env = Environment(
        loader=FileSystemLoader(str(folder)),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=num,
        dur=dur,
        stamp=stamp,
        clock=clock,
        ago=ago,
        until=until,
        pretty=pretty,
        waited=waited,
        ran=ran,
        gpu=gpu,
        bytes=stats.format_bytes,
    )
    return env
