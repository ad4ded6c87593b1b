"""The analyzer: ANALYZE ``jobs`` when a burst changed it a lot (leader only).

Autovacuum analyzes ``jobs`` after 2 % of it changed (the table's own setting,
``migrations/0001_initial.sql``), but it looks only once per
``autovacuum_naptime`` (60 s by default) and analyzes one table at a time per
worker: the first burst after a deployment, a migration or a bulk load can run
for a minute or more on statistics that describe a table a fraction of its
size. The worker's own statements do not care (their plans do not depend on
statistics), but everything else does, and a cached plan is only re-made
when an ANALYZE invalidates it.

So the leader reads the change counter every few seconds (one read of
``pg_stat_user_tables``, no table touched) and runs ``ANALYZE`` when the rows
changed since the last analysis reach ``min_changes`` and ``fraction`` of the
rows the planner believes the table holds: a burst, not the steady trickle
autovacuum already keeps up with. ANALYZE samples a bounded number of rows
(30,000 at the default statistics target), so one run costs about the same
whether the table holds 10 thousand or 10 million rows (measured: see
docs/operations.md, "Statistics and autovacuum"); it takes a lock that blocks
no read or write of the rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from queue_engine.daemon.service import REAL_TIMING, STAGGER_DEFAULT_S, Service, Timing
from queue_engine.foundation import table_statistics
from queue_engine.foundation.db import KEEPALIVE_KWARGS, LazyConnection

#: How often the leader reads the change counter (seconds).
ANALYZE_CHECK_DEFAULT_S = 5.0
#: Rows changed since the last analysis below which nothing is done.
ANALYZE_MIN_CHANGES_DEFAULT = 1000
#: ... and the share of the planner's row estimate they must also reach.
ANALYZE_FRACTION_DEFAULT = 0.5
#: The tables the leader watches: the one every hot statement reads.
ANALYZE_TABLES = ("jobs",)

log = logging.getLogger("queue_engine.analyzer")


@dataclass(frozen=True, slots=True)
class AnalyzeResult:
    """What one analyzer run saw and did."""

    analyzed: tuple[str, ...] = ()
    changes: int = 0
    estimated_rows: float = 0.0
    analyze_ms: float = 0.0

    @property
    def did_work(self) -> bool:
        """True when a table was analyzed."""
        return bool(self.analyzed)

    def log_fields(self) -> dict[str, Any]:
        """The tables analyzed, the changes that triggered it, what it cost."""
        return {
            "tables": ",".join(self.analyzed) or "-",
            "changes": self.changes,
            "estimated_rows": round(self.estimated_rows),
            "analyze_ms": round(self.analyze_ms, 1),
        }


def needs_analyze(
    table: table_statistics.TableStatistics, *, min_changes: int, fraction: float
) -> bool:
    """True when ``table`` changed by at least ``min_changes`` rows and ``fraction`` of its estimate.

    A never-analyzed table has no estimate (-1): any burst of ``min_changes``
    rows qualifies.
    """
    estimate = max(table.estimated_rows, 0.0)
    return table.changes >= min_changes and table.changes >= fraction * estimate


class Analyzer(Service[AnalyzeResult]):
    """Leader-only service that analyzes the jobs table after a burst of changes."""

    name = "analyzer"

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        interval_s: float = ANALYZE_CHECK_DEFAULT_S,
        min_changes: int = ANALYZE_MIN_CHANGES_DEFAULT,
        fraction: float = ANALYZE_FRACTION_DEFAULT,
        tables: tuple[str, ...] = ANALYZE_TABLES,
        stagger_s: float = STAGGER_DEFAULT_S,
        timing: Timing = REAL_TIMING,
    ) -> None:
        super().__init__(interval_s=interval_s, stagger_s=stagger_s, timing=timing, logger=log)
        if min_changes < 1 or fraction < 0:
            raise ValueError("Analyzer: min_changes must be >= 1 and fraction >= 0")
        self.schema = schema
        self.min_changes = min_changes
        self.fraction = fraction
        self.tables = tables
        self.db = LazyConnection(dsn, **KEEPALIVE_KWARGS)

    def run_once(self) -> AnalyzeResult:
        """Read the change counters; ANALYZE the watched tables a burst changed."""
        with self.db.session() as conn:
            due = [
                t
                for t in table_statistics.read(conn, self.schema, self.tables)
                if needs_analyze(t, min_changes=self.min_changes, fraction=self.fraction)
            ]
            started = self.timing.clock()
            for table in due:
                table_statistics.analyze(conn, self.schema, table.name)
            elapsed_ms = (self.timing.clock() - started) * 1000
        return AnalyzeResult(
            analyzed=tuple(t.name for t in due),
            changes=sum(t.changes for t in due),
            estimated_rows=sum(max(t.estimated_rows, 0.0) for t in due),
            analyze_ms=elapsed_ms if due else 0.0,
        )

    def on_stop(self) -> None:
        """Close the analyzer's connection."""
        self.db.reset()
