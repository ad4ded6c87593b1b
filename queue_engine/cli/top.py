"""One frame of ``queue-ctl top``, fitted to the terminal's width.

The full tables of ``queue-ctl stats`` and ``workers`` are about 190 and 120
columns wide, and an 80-column terminal showed their left half. As ``top``
and ``htop`` do, a frame keeps the columns that matter most and lets the
others go as the terminal narrows: first every header takes its short form,
then columns are dropped one at a time, highest rank first (the ranks are
data below, one per column of :func:`~queue_engine.cli.render.stats_cells`
and :func:`~queue_engine.cli.render.workers_cells`, held to them by
``tests/unit/test_top_frame.py``), and a line under the title says how many are hidden.
Rank 0 columns are never dropped; a line still too wide (a very long queue
name or worker id) is cut at the width, the last resort.

Pure, like :mod:`~queue_engine.cli.render`: values in, text out;
:func:`queue_engine.cli.views.top_cmd` fetches the figures and draws.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from queue_engine.cli.flow_render import keys_cells, partitions_cells
from queue_engine.cli.render import ESTIMATE_NOTE, Row, stats_cells, table, workers_cells
from queue_engine.operator import stats
from queue_engine.operator.flow import KeyFlow, PartitionFlow

#: Keys and partitions a ``top`` frame shows (busiest, deepest first).
TOP_FLOW_ROWS = 5


@dataclass(frozen=True)
class Column:
    """How a column of a ``top`` table gives way to a narrow terminal."""

    #: 0: always shown; otherwise dropped before every column of a lower rank.
    rank: int
    #: The header once headers are shortened (the full one names the unit too).
    short: str


#: The queues table (``queue-ctl stats``): depth, failures, pauses and workers stay longest.
QUEUE_COLUMNS: Mapping[str, Column] = {
    "QUEUE": Column(0, "QUEUE"),
    "QUEUED": Column(0, "QUEUED"),
    "DELAYED": Column(3, "DELAY"),
    "RUNNING": Column(0, "RUNNING"),
    "OK/1h": Column(5, "OK/1h"),
    "FAILED/1h": Column(1, "FAIL/1h"),
    "LOST/1h": Column(5, "LOST/1h"),
    "IN/min 1m|15m": Column(4, "IN/m 1|15"),
    "OUT/min 1m|15m": Column(2, "OUT/m 1|15"),
    "WAIT p50/p95": Column(2, "WAIT 50/95"),
    "RUN p50/p95": Column(4, "RUN 50/95"),
    "OLDEST": Column(3, "OLDEST"),
    "WORKERS live/parked/dead": Column(1, "WORKERS l/p/d"),
    "REPLICAS": Column(6, "REPL"),
    "SCALE": Column(7, "SCALE"),
    "RATE": Column(7, "RATE"),
    "PAUSED": Column(1, "PAUSED"),
}

#: The workers table: who, on which queue, doing what, alive or not. The id
#: already holds the host and pid, so those two columns go first.
WORKER_COLUMNS: Mapping[str, Column] = {
    "ID": Column(0, "ID"),
    "ROLE": Column(4, "ROLE"),
    "HOST": Column(6, "HOST"),
    "PID": Column(6, "PID"),
    "QUEUE": Column(0, "QUEUE"),
    "STATE": Column(0, "STATE"),
    "WARM": Column(5, "WARM"),
    "JOB": Column(1, "JOB"),
    "BEAT AGO": Column(2, "BEAT"),
    "RSS": Column(3, "RSS"),
    "CPU%": Column(3, "CPU%"),
    "LOAD": Column(5, "LOAD"),
    "HOST CPU%": Column(6, "HCPU%"),
    "HOST MEM": Column(6, "HMEM"),
    "LIVENESS": Column(1, "LIVENESS"),
}

#: The concurrency keys table: the key, how full it is and what waits on it.
KEY_COLUMNS: Mapping[str, Column] = {
    "KEY": Column(0, "KEY"),
    "RUNNING": Column(0, "RUN"),
    "LIMIT": Column(0, "LIM"),
    "WAITING": Column(0, "WAIT"),
    "STATE": Column(1, "STATE"),
}

#: The partitions table: where the backlog is.
PARTITION_COLUMNS: Mapping[str, Column] = {
    "QUEUE": Column(1, "QUEUE"),
    "PARTITION": Column(0, "PARTITION"),
    "QUEUED": Column(0, "QUEUED"),
    "RUNNING": Column(0, "RUN"),
}


@dataclass(frozen=True)
class Fitted:
    """A table fitted to a width: its lines, and the headers of the columns it left out."""

    lines: list[str]
    hidden: list[str]


def fit_table(
    header: Row,
    rows: list[Row],
    right: set[int],
    columns: Mapping[str, Column],
    width: int,
) -> Fitted:
    """The table as wide as it is, if it fits; else short headers and fewer columns."""
    lines = table(header, rows, right)
    if _widest(lines) <= width:
        return Fitted(lines, [])
    shown = list(range(len(header)))
    short = [columns[h].short for h in header]
    while True:
        lines = table(
            [short[i] for i in shown],
            [[row[i] for i in shown] for row in rows],
            {n for n, i in enumerate(shown) if i in right},
        )
        droppable = [i for i in shown if columns[header[i]].rank > 0]
        if _widest(lines) <= width or not droppable:
            break
        # The highest rank goes first; of equal ranks, the rightmost.
        shown.remove(max(droppable, key=lambda i: (columns[header[i]].rank, i)))
    hidden = [header[i] for i in range(len(header)) if i not in shown]
    return Fitted([line[:width] for line in lines], hidden)


def _widest(lines: list[str]) -> int:
    return max((len(line) for line in lines), default=0)


def _title(now: datetime, schema: str, hidden: int, width: int) -> list[str]:
    """The title line (what, when, which schema, how to quit) and, if any, what is hidden."""
    title = f"queue-engine top  {now.strftime('%Y-%m-%d %H:%M:%S UTC')}  schema={schema}  q to quit"
    lines = [title]
    if hidden:
        lines.append(
            f"{hidden} columns hidden at this width (queue-ctl stats and workers show all)"
        )
    return [line[:width] for line in lines]


def top_frame(
    queues: list[stats.QueueStats],
    workers: list[stats.WorkerRow],
    schema: str,
    now: datetime,
    *,
    width: int,
    keys: list[KeyFlow] | None = None,
    partitions: list[PartitionFlow] | None = None,
) -> str:
    """One frame of ``queue-ctl top``: a title line, the queues, the workers, ``width`` wide.

    Under the workers, when there are any: the busiest concurrency keys and
    the deepest partitions (:data:`TOP_FLOW_ROWS` of each).
    """
    queue_table = fit_table(*stats_cells(queues), QUEUE_COLUMNS, width)
    worker_table = fit_table(*workers_cells(workers), WORKER_COLUMNS, width)
    flow: list[str] = []
    if keys:
        flow += ["", *fit_table(*keys_cells(keys), KEY_COLUMNS, width).lines]
    if partitions:
        flow += ["", *fit_table(*partitions_cells(partitions), PARTITION_COLUMNS, width).lines]
    note = (
        textwrap.wrap(ESTIMATE_NOTE, width)
        if any(q.estimated or q.at_least for q in queues)
        else []
    )
    hidden = len(queue_table.hidden) + len(worker_table.hidden)
    return "\n".join(
        [
            *_title(now, schema, hidden, width),
            "",
            *queue_table.lines,
            *note,
            "",
            *worker_table.lines,
            *flow,
        ]
    )
