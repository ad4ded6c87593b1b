"""The vacuumer: VACUUM ``jobs`` while workers drain it, so claims stop walking dead entries (leader only).

Why: a claim takes the first due job from ``jobs_claimable_idx`` (``WHERE
status = 'queued'``, ordered as the claim orders) and moves it out of that
index's predicate. Its entry stays in the index, dead, until a ``VACUUM``
removes it, and it sits exactly where every later claim starts: at the head.
Postgres marks such entries and skips them without visiting the table, but
each claim still steps over every one of them, page by page. Measured with one
worker (bench/runs/2026-11-27-log.md, "The claim index during a drain"): the claim's
server time grows by about 2.8 ns per dead entry, so a drain of 30,000 jobs
ran 16 % slower than a drain of 2,000, and a million-job backlog slower still.
Autovacuum removes them (migration 0012 sets ``jobs`` to be vacuumed after
1,000 dead rows), but it looks at a database once per ``autovacuum_naptime``,
60 s by default: a minute of claims, 150,000 of them at 2,500 jobs/s.

So the leader reads ``n_dead_tup`` of ``jobs`` every ``interval_s`` (one read
of ``pg_stat_user_tables``, as the analyzer does) and runs ``VACUUM`` when it
reaches ``dead_rows`` (two dead row versions per job: the claim's and the
finish's). A VACUUM of ``jobs`` reads the pages that changed and every index
of the table; the archiver keeps ``jobs`` to live jobs and the last minute of
history, so that stays short, but a big backlog makes it longer. The pacer
(:class:`VacuumPacer`) therefore spends at most ``max_share`` of the time
vacuuming, and backs off when a VACUUM could not remove what it found (a
long transaction holds the horizon back): that is worth a warning, and
another VACUUM right away would remove nothing more.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg

from queue_engine.daemon.service import REAL_TIMING, STAGGER_DEFAULT_S, Service, Timing
from queue_engine.foundation import settings as table
from queue_engine.foundation import table_statistics
from queue_engine.foundation.db import KEEPALIVE_KWARGS, LazyConnection
from queue_engine.foundation.logs import log_event
from queue_engine.orchestrator import metrics

#: The share of wall time the vacuumer may spend in VACUUM (a run of d seconds
#: is followed by at least d * (1 / share - 1) seconds without one).
MAX_SHARE_DEFAULT = 0.05
#: The longest wait between VACUUMs that removed too little (seconds).
BLOCKED_BACKOFF_MAX_S = 60.0
#: The table whose claim index the vacuumer keeps clean.
VACUUM_TABLE = "jobs"

log = logging.getLogger("queue_engine.vacuumer")


class VacuumPacer:
    """When the next VACUUM may run: after enough dead rows, within the time share, unless blocked.

    Pure logic on a clock given to each call, so it is tested without a server
    or real time. A VACUUM that leaves at least half of ``dead_rows`` behind
    (``dead_after``) removed too little to be worth repeating soon: the gap
    before the next one doubles, from ``base_s`` up to
    :data:`BLOCKED_BACKOFF_MAX_S`, until a VACUUM gets below that again.
    """

    def __init__(self, dead_rows: int, *, max_share: float, base_s: float) -> None:
        if dead_rows < 1:
            raise ValueError("VacuumPacer: dead_rows must be >= 1")
        if not 0 < max_share <= 1:
            raise ValueError("VacuumPacer: max_share must be in (0, 1]")
        self.dead_rows = dead_rows
        self.max_share = max_share
        self.base_s = base_s
        self.not_before = float("-inf")
        #: The current back-off after VACUUMs that removed too little (0: none).
        self.blocked_s = 0.0

    def due(self, dead_rows: int, now: float) -> bool:
        """True when ``dead_rows`` dead versions call for a VACUUM and the pacing allows one now."""
        return dead_rows >= self.dead_rows and now >= self.not_before

    def ran(self, started: float, ended: float, dead_after: int) -> bool:
        """Note a VACUUM from ``started`` to ``ended`` that left ``dead_after``; True if it was blocked.

        "Blocked" is only reported for the first of a series, so a held
        horizon is warned about once, not at every back-off step.
        """
        gap = (ended - started) * (1 / self.max_share - 1)
        first_block = False
        if dead_after * 2 >= self.dead_rows:
            first_block = self.blocked_s == 0
            self.blocked_s = min(max(self.blocked_s * 2, self.base_s), BLOCKED_BACKOFF_MAX_S)
            gap = max(gap, self.blocked_s)
        else:
            self.blocked_s = 0.0
        self.not_before = ended + gap
        return first_block

    def skipped(self, now: float) -> None:
        """The VACUUM skipped the table (another one held it): try again after ``base_s``."""
        self.not_before = now + self.base_s


@dataclass(frozen=True, slots=True)
class VacuumResult:
    """What one vacuumer check saw and did."""

    vacuumed: bool = False
    dead_before: int = 0
    dead_after: int = 0
    vacuum_ms: float = 0.0
    #: The VACUUM left too much behind (first of a series): see :class:`VacuumPacer`.
    blocked: bool = False
    #: Another VACUUM held the table, so this one skipped it.
    skipped: bool = False

    @property
    def did_work(self) -> bool:
        """Never an info line: during a drain a VACUUM every second or two is the normal case.

        Each run logs at debug; the metrics count them (``vacuums``,
        ``vacuum_seconds``) and a blocked VACUUM logs its own warning.
        """
        return False

    def log_fields(self) -> dict[str, Any]:
        """Whether it vacuumed, the dead rows before and after, what it cost."""
        return {
            "vacuumed": self.vacuumed,
            "skipped": self.skipped,
            "dead_before": self.dead_before,
            "dead_after": self.dead_after,
            "vacuum_ms": round(self.vacuum_ms, 1),
        }


class Vacuumer(Service[VacuumResult]):
    """Leader-only service that VACUUMs ``jobs`` when claims have left enough dead entries."""

    name = "vacuumer"

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        dead_rows: int,
        interval_s: float = 1.0,
        max_share: float = MAX_SHARE_DEFAULT,
        stagger_s: float = STAGGER_DEFAULT_S,
        timing: Timing = REAL_TIMING,
    ) -> None:
        super().__init__(interval_s=interval_s, stagger_s=stagger_s, timing=timing, logger=log)
        self.schema = schema
        self.pacer = VacuumPacer(dead_rows, max_share=max_share, base_s=interval_s)
        self.db = LazyConnection(dsn, **KEEPALIVE_KWARGS)

    @classmethod
    def from_env(cls, dsn: str, schema: str, **kwargs: Any) -> Vacuumer | None:
        """A vacuumer with ``QUEUE_ENGINE_VACUUM_DEAD_ROWS`` and ``..._S``; None when the first is 0."""
        dead_rows = table.VACUUM_DEAD_ROWS.read()
        if dead_rows == 0:
            return None
        kwargs.setdefault("interval_s", table.VACUUM_S.read())
        return cls(dsn, schema, dead_rows=dead_rows, **kwargs)

    def _statistics(self, conn: psycopg.Connection[Any]) -> table_statistics.TableStatistics:
        (jobs,) = table_statistics.read(conn, self.schema, (VACUUM_TABLE,))
        return jobs

    def run_once(self) -> VacuumResult:
        """Read the dead row count of ``jobs``; VACUUM it when the pacer says so."""
        with self.db.session() as conn:
            before = self._statistics(conn)
            started = self.timing.clock()
            if not self.pacer.due(before.dead_rows, started):
                return VacuumResult(dead_before=before.dead_rows, dead_after=before.dead_rows)
            table_statistics.vacuum(conn, self.schema, VACUUM_TABLE)
            ended = self.timing.clock()
            # VACUUM reports its count and what it left before it returns.
            after = self._statistics(conn)
        dead_after = after.dead_rows
        if after.vacuum_count == before.vacuum_count:
            # SKIP_LOCKED: autovacuum (or an operator) is vacuuming it right now.
            self.pacer.skipped(ended)
            return VacuumResult(dead_before=before.dead_rows, dead_after=dead_after, skipped=True)
        blocked = self.pacer.ran(started, ended, dead_after)
        metrics.count("vacuums")
        metrics.count("vacuum_seconds", ended - started)
        if blocked:
            log_event(
                log,
                logging.WARNING,
                "vacuumer.blocked",
                table=VACUUM_TABLE,
                dead_before=before.dead_rows,
                dead_after=dead_after,
                retry_s=round(self.pacer.blocked_s, 1),
                reason="VACUUM could not remove the dead rows: a long transaction or "
                "replication slot holds the xmin horizon back (docs/operations.md)",
            )
        return VacuumResult(
            vacuumed=True,
            dead_before=before.dead_rows,
            dead_after=dead_after,
            vacuum_ms=(ended - started) * 1000,
            blocked=blocked,
        )

    def on_stop(self) -> None:
        """Close the vacuumer's connection."""
        self.db.reset()
