"""Archiving: the leader moves succeeded jobs out of ``jobs`` into ``jobs_archive``.

Why (migration 0027 has the measurements): a job leaves two dead row versions
in ``jobs`` for every one that lives on, and while finished jobs stay in
``jobs`` for their retention, almost every page of it holds finished rows
around small holes. New jobs go wherever the free-space map finds room, one or
two per hole, so on a table of months of history each enqueue touched cold
pages. Once a job has succeeded nothing in the engine writes it again but
retention, so after ``QUEUE_ENGINE_ARCHIVE_AFTER_S`` (60 s) it moves to a table
of its own: pages of ``jobs`` empty out as a whole, and new jobs fill them.

What moves: succeeded jobs outside workflows without an idempotency key
(``sql/archive_jobs.sql``). Unsuccessful jobs stay (operators retry and
inspect them), and so do keyed jobs (enqueue checks a key's uniqueness in
``jobs``) and workflow nodes (their children read them, and a finished
workflow is pruned as a whole). Readers of a job by id, the lists, stats,
metrics and dashboards read ``jobs_all`` (both tables), so a move is
invisible to them; the pruner deletes archived jobs after the succeeded
retention.

Each statement moves at most ``batch_size`` jobs, oldest first; a run takes at
most ``max_batches`` of them, then, while jobs are left (an existing history
after the upgrade, a burst), the next run comes after ``catch_up_s``: about
20,000 jobs/s at the defaults, in short transactions. The scan walks
``jobs_finished_at_idx`` from a cursor kept between runs, so the rows that
stay are not read again by every batch; the cursor starts over every
``rescan_s`` (and with a new leader) to pick up a row that was skipped because
someone held it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Unpack

import psycopg

from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.sweep import (
    CATCH_UP_DEFAULT_S,
    BacklogSweep,
    SweepOptions,
    run_batches,
)

#: Jobs moved per statement.
BATCH_SIZE_DEFAULT = 1000
#: Statements per run.
MAX_BATCHES_DEFAULT = 20
#: How often the scan starts over from the oldest finished job (seconds).
RESCAN_DEFAULT_S = 3600.0


@dataclass(slots=True)
class Cursor:
    """Where the next batch's scan of ``jobs_finished_at_idx`` starts: after (finished_at, id)."""

    finished_at: datetime | None = None
    job_id: int | None = None


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    """What one archiver run did."""

    moved: int = 0
    scanned: int = 0
    batches: int = 0
    #: True when the run stopped at ``max_batches`` with rows left to scan.
    more: bool = False

    @property
    def did_work(self) -> bool:
        """True when a job was moved."""
        return self.moved > 0

    def log_fields(self) -> dict[str, Any]:
        """Jobs moved and scanned, and the number of statements."""
        return {
            "moved": self.moved,
            "scanned": self.scanned,
            "batches": self.batches,
            "more": self.more,
        }


def archive_once(
    conn: psycopg.Connection[Any],
    schema: str,
    after_s: float,
    cursor: Cursor,
    *,
    batch_size: int = BATCH_SIZE_DEFAULT,
    max_batches: int = MAX_BATCHES_DEFAULT,
    now: datetime | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> ArchiveResult:
    """Move bounded batches of succeeded jobs older than ``after_s`` to ``jobs_archive``.

    ``conn`` must be in autocommit mode: each batch commits on its own.
    ``cursor`` is advanced past every row scanned.
    """
    if batch_size < 1 or max_batches < 1:
        raise ValueError("batch_size and max_batches must be >= 1")
    if after_s <= 0:
        raise ValueError("after_s must be > 0")
    statement = queries.query("archive_jobs", schema)
    moved = scanned = 0
    more = False

    def batch() -> bool:
        nonlocal moved, scanned, more
        row = conn.execute(
            statement,
            {
                "now": now,
                "after_s": after_s,
                "after_at": cursor.finished_at,
                "after_id": cursor.job_id,
                "limit": batch_size,
            },
        ).fetchone()
        assert row is not None
        n_moved, n_scanned, last_at, last_id = row
        moved += int(n_moved)
        scanned += int(n_scanned)
        if last_at is not None:
            cursor.finished_at, cursor.job_id = last_at, int(last_id)
        more = int(n_scanned) >= batch_size
        return more

    batches = run_batches(batch, max_batches=max_batches, stopping=stopping)
    return ArchiveResult(moved=moved, scanned=scanned, batches=batches, more=more)


class Archiver(BacklogSweep[ArchiveResult]):
    """Leader-only service moving succeeded jobs to ``jobs_archive`` (start/stop like the pruner)."""

    name = "archiver"
    interval_default_s = table.ARCHIVE_S.default
    batch_size_default = BATCH_SIZE_DEFAULT
    max_batches_default = MAX_BATCHES_DEFAULT

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        after_s: float = table.ARCHIVE_AFTER_S.default,
        catch_up_s: float = CATCH_UP_DEFAULT_S,
        rescan_s: float = RESCAN_DEFAULT_S,
        **options: Unpack[SweepOptions],
    ) -> None:
        super().__init__(dsn, schema, catch_up_s=catch_up_s, **options)
        if after_s <= 0:
            raise ValueError(
                "after_s must be > 0 (0 turns archiving off: do not start the service)"
            )
        self.after_s = after_s
        self.rescan_s = rescan_s
        self.cursor = Cursor()
        self._cursor_since = self.timing.clock()

    @classmethod
    def from_env(cls, dsn: str, schema: str, **kwargs: Any) -> Archiver | None:
        """An archiver with ``QUEUE_ENGINE_ARCHIVE_S`` and ``..._AFTER_S``; None when that is 0."""
        after_s = table.ARCHIVE_AFTER_S.read()
        if after_s == 0:
            return None
        kwargs.setdefault("interval_s", table.ARCHIVE_S.read())
        return cls(dsn, schema, after_s=after_s, **kwargs)

    def run_once(self) -> ArchiveResult:
        """Move up to ``max_batches`` batches; start the scan over every ``rescan_s``."""
        if self.timing.clock() - self._cursor_since >= self.rescan_s:
            self.cursor = Cursor()
            self._cursor_since = self.timing.clock()
        with self.session() as conn:
            result = archive_once(
                conn,
                self.schema,
                self.after_s,
                self.cursor,
                batch_size=self.batch_size,
                max_batches=self.max_batches,
                now=self.now(),
                stopping=lambda: self.stopping,
            )
        metrics.count("archived_jobs", result.moved)
        return result
