"""The flow-control tables of ``queue-ctl stats``, ``top`` and ``limits list``.

Pure, like :mod:`queue_engine.cli.render`: rows of
:mod:`queue_engine.operator.flow` in, cells and lines out. A figure read past
``QUEUE_ENGINE_STATS_EXACT_CAP`` jobs is a lower bound and says so with
``≥``, as the queues table does.
"""

from __future__ import annotations

from queue_engine.cli.render import Row, table
from queue_engine.operator.flow import KeyFlow, PartitionFlow

#: Longest key or partition shown in a table cell; longer ones end in "…".
CELL_CHARS = 32
AT_LEAST = "\N{GREATER-THAN OR EQUAL TO} "


def clip(text: str, limit: int = CELL_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "\N{HORIZONTAL ELLIPSIS}"


def waiting_text(row: KeyFlow) -> str:
    """A key's waiting jobs: exact, or ``≥ n`` when counting stopped at the cap."""
    return f"{AT_LEAST}{row.waiting}" if row.waiting_at_least else str(row.waiting)


def limit_text(row: KeyFlow) -> str:
    """The effective limit, marked ``(job)`` when it is the jobs' own, ``-`` when none."""
    if row.limit is None:
        return "-"
    return str(row.limit) if row.max_running is not None else f"{row.limit} (job)"


def keys_cells(rows: list[KeyFlow]) -> tuple[Row, list[Row], set[int]]:
    """Per-key table: key, running, limit, waiting, state (``full`` at the limit)."""
    header = ["KEY", "RUNNING", "LIMIT", "WAITING", "STATE"]
    body = [
        [
            clip(r.key),
            str(r.running),
            limit_text(r),
            waiting_text(r),
            ("held" if r.limit == 0 else "full") if r.at_limit else "",
        ]
        for r in rows
    ]
    return header, body, {1, 2, 3}


def partitions_cells(rows: list[PartitionFlow]) -> tuple[Row, list[Row], set[int]]:
    """Per-partition table: queue, partition, queued (``≥`` past the cap), running."""
    header = ["QUEUE", "PARTITION", "QUEUED", "RUNNING"]
    body = [
        [
            clip(r.queue, 24),
            clip(r.partition_key),
            f"{AT_LEAST}{r.queued}" if r.queued_at_least else str(r.queued),
            str(r.running),
        ]
        for r in rows
    ]
    return header, body, {2, 3}


def flow_lines(keys: list[KeyFlow], partitions: list[PartitionFlow]) -> list[str]:
    """The sections ``queue-ctl stats`` prints under the queues (none when both are empty)."""
    lines: list[str] = []
    if keys:
        lines += ["", "Concurrency keys (busiest first)", *table(*keys_cells(keys))]
    if partitions:
        lines += ["", "Partitions (deepest first)", *table(*partitions_cells(partitions))]
    return lines
