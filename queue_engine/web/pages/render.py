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
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jinja2 import Environment, FileSystemLoader, select_autoescape

from queue_engine.operator import job_display, stats
from queue_engine.operator import workflow_layout as layout
from queue_engine.producer.workflows import INPUT_TASK
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


def local(value: datetime | None, zone: str = "UTC") -> str:
    """A moment in a time zone (a schedule's own), to the minute: ``2026-11-29 02:00 CET``."""
    if value is None:
        return "—"
    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        tz = ZoneInfo("UTC")
    return value.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z")


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
    return job_display.runs_in(value, now or _now())


def shown(job: Any) -> str:
    """The status a person reads (``scheduled``, ``awaiting input``): :mod:`queue_engine.operator.job_display`."""
    return job_display.shown_status(job, _now())


def badge(status: str) -> str:
    """The CSS class of a status's badge (``awaiting input`` → ``awaiting-input``)."""
    return status.replace(" ", "-")


def error_summary(text: str | None) -> str:
    """The line of an error that says what was raised (a traceback's last line), whole.

    The page shortens it at a word (``truncate``), never in the middle of one.
    """
    return layout.error_line(text or "", limit=None)


def last_line(text: str | None) -> str:
    """The last non-empty line of a text (the end of a traceback: what was raised)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


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
    text = ", ".join(parts) or "—"
    own = worker.gpu_memory_mib
    if own is not None and parts:
        text += f" (this process {own / 1024:.1f} GiB)"
    return text


def host_use(worker: stats.WorkerRow) -> str:
    """The host's CPU % and memory in use / in all (GiB) at the last beat, e.g. ``12% · 5.1/15.6G``."""
    cpu = worker.host_cpu_pct
    memory = worker.host_memory
    parts = [f"{cpu:.0f}%" if cpu is not None else "—"]
    if memory is not None:
        used, total = memory
        parts.append(f"{used / 2**30:.1f}/{total / 2**30:.1f}G")
    return " · ".join(parts) if cpu is not None or memory is not None else "—"


#: Keys a progress document may count its work with: the steps done, and the whole.
#: ``{"done": 3, "total": 10}`` (queue-ctl demo), ``{"step": 3, "of": 10}`` and
#: ``{"done": 3, "of": 10}`` (docs/guides/worker.md), ``{"current": 3, "total": 10}``.
PROGRESS_DONE_KEYS = ("done", "step", "current", "completed", "processed")
PROGRESS_TOTAL_KEYS = ("total", "of", "count")
#: Keys whose text says what the job is doing (shown beside the bar).
PROGRESS_TEXT_KEYS = ("message", "stage", "phase", "status")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _first(document: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    return next((n for k in keys if (n := _number(document.get(k))) is not None), None)


def progress_of(value: Any) -> dict[str, Any] | None:
    """What a job's progress document says: a 0..1 fraction for the bar, a label, the JSON.

    Understood: ``{step|done|current, of|total}``, ``{percent}`` (0-100),
    ``{fraction}`` (0-1), and a bare number (a fraction up to 1, else a
    percentage). Any other document is shown as its JSON alone, without a bar.
    """
    if value is None:
        return None
    fraction = None
    label = ""
    note = None
    if isinstance(value, dict):
        done, total = _first(value, PROGRESS_DONE_KEYS), _first(value, PROGRESS_TOTAL_KEYS)
        percent, part = _number(value.get("percent")), _number(value.get("fraction"))
        if done is not None and total is not None and total > 0:
            fraction = done / total
            label = f"{num(done)} of {num(total)}"
        elif percent is not None:
            fraction = percent / 100.0
        elif part is not None:
            fraction = part
        note = next(
            (str(value[k]) for k in PROGRESS_TEXT_KEYS if isinstance(value.get(k), str)), None
        )
    elif (number := _number(value)) is not None:
        fraction = number if number <= 1 else number / 100.0
    if fraction is not None:
        fraction = min(1.0, max(0.0, fraction))
        percent_text = f"{fraction * 100:.0f}%"
        label = f"{label} · {percent_text}" if label else percent_text
    text = json.dumps(value, separators=(", ", ": "), sort_keys=True, default=str)
    return {"text": text, "fraction": fraction, "label": label, "note": note}


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
        local=local,
        clock=clock,
        ago=ago,
        until=until,
        shown=shown,
        badge=badge,
        error_summary=error_summary,
        last_line=last_line,
        progress=progress_of,
        pretty=pretty,
        waited=waited,
        ran=ran,
        gpu=gpu,
        host_use=host_use,
        bytes=stats.format_bytes,
    )
    env.globals["input_task"] = INPUT_TASK
    return env
