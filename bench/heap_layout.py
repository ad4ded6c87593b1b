"""Where new jobs land after the engine's own workers have churned through a table.

Issue 15, scale: bulk enqueue at 10 million jobs was not flat (bench/runs/2026-11-27-log.md,
"Finished jobs in a table of their own"). Its cost is where Postgres's
free-space map sends new rows: pages with a small hole (room for one or two
jobs) each take a job or two, and each such page is a buffer read and, the
first time it changes after a checkpoint, an 8 kB full-page image in the WAL.
This bench asks whether the engine's own life leaves such holes (it does:
after a million jobs, 1,000 new ones landed on 990 pages), and what the
archiver (migration 0027) changes:

1. a fresh database; K ``queue-claim-worker`` processes (prefetch 1, as the
   scale bench's drain) work off jobs that one producer enqueues in calls of
   1,000, keeping a backlog of at most ``--backlog`` jobs, until ``--jobs``
   jobs have finished; autovacuum runs as the migrations set it; with
   ``--archive-after S`` the archiver runs beside them, as the orchestrator's
   does (without it: as with ``QUEUE_ENGINE_ARCHIVE_AFTER_S=0``);
2. ``VACUUM``, then the free-space map's pages by room (``pg_freespacemap``);
3. ``CHECKPOINT``, then ``--probes`` inserts of 1,000 jobs (``enqueue_many``,
   each rolled back): heap pages the rows landed on, WAL bytes (full-page
   images included: the first change of a page after the checkpoint), time.

``--fill-like`` instead writes the same number of jobs as ``scale.py``'s fill
does (three set-based statements per chunk of ``--chunk``), for comparison on
the same server.

    python bench/heap_layout.py --jobs 1000000
    python bench/heap_layout.py --jobs 1000000 --archive-after 60
    python bench/heap_layout.py --jobs 1000000 --fill-like --chunk 500000
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
import scale_db as db
from scale import bench_left, start_workers
from worker_bench import stop_workers

from queue_engine import Client
from queue_engine.orchestrator.archiver import Archiver

FSM_BUCKETS = """
SELECT count(*) AS pages,
       count(*) FILTER (WHERE avail >= 256 AND avail < 1024) AS small_holes,
       count(*) FILTER (WHERE avail >= 1024 AND avail < 7000) AS big_holes,
       count(*) FILTER (WHERE avail >= 7000) AS empty
FROM pg_freespace('queue_engine.jobs')
"""

PROBE_PAGES = """
SELECT count(DISTINCT (ctid::text::point)[0])::int FROM queue_engine.jobs WHERE queue = 'probe'
"""


def churn(dsn: str, jobs: int, k: int, backlog: int, archive_after: float | None) -> float:
    """K workers finish ``jobs`` jobs that one producer enqueues as they go; returns seconds.

    With ``archive_after``, the archiver runs beside them (as the orchestrator
    does; without it, as with ``QUEUE_ENGINE_ARCHIVE_AFTER_S=0``).
    """
    archiver = None
    if archive_after is not None:
        archiver = Archiver(dsn, "queue_engine", after_s=archive_after)
        archiver.start()
    t0 = time.perf_counter()
    procs = start_workers(dsn, k)
    try:
        with Client(dsn) as client, psycopg.connect(dsn, autocommit=True) as conn:
            sent, next_log = 0, 100_000
            while True:
                done = sent - bench_left(conn)
                if done >= jobs:
                    break
                if sent < jobs and sent - done < backlog:
                    n = min(1000, jobs - sent)
                    client.enqueue_many(
                        [
                            {"task": "noop", "queue": "bench", "args": {"t": time.time(), "i": i}}
                            for i in range(sent, sent + n)
                        ]
                    )
                    sent += n
                else:
                    time.sleep(0.2)
                if done >= next_log:
                    db.log(f"churn: {done:,} finished, {sent:,} sent")
                    next_log += 100_000
    finally:
        stop_workers(procs)
        if archiver is not None:
            archiver.stop()
    return time.perf_counter() - t0


def layout(dsn: str, probes: int) -> dict[str, float]:
    """FSM buckets after a VACUUM, and where ``probes`` rolled-back 1,000-job inserts land."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_freespacemap")
        conn.execute("VACUUM queue_engine.jobs")
        row = conn.execute(FSM_BUCKETS).fetchone()
        assert row is not None
        conn.execute("CHECKPOINT")
    out = dict(zip(("pages", "small_holes", "big_holes", "empty"), map(float, row), strict=True))
    pages, wal, ms = [], [], []
    for _ in range(probes):
        with psycopg.connect(dsn) as conn:
            lsn = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
            assert lsn is not None
            t0 = time.perf_counter()
            Client(conn=conn).enqueue_many(
                [{"task": "noop", "queue": "probe", "args": {"i": i}} for i in range(1000)]
            )
            ms.append((time.perf_counter() - t0) * 1000)
            wal_row = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (lsn[0],)
            ).fetchone()
            page_row = conn.execute(PROBE_PAGES).fetchone()
            assert wal_row is not None and page_row is not None
            wal.append(float(wal_row[0]) / 1e6)
            pages.append(float(page_row[0]))
            conn.rollback()
    out["probe pages / 1,000 jobs"] = statistics.median(pages)
    out["probe WAL MB / 1,000 jobs"] = statistics.median(wal)
    out["probe ms / 1,000 jobs"] = statistics.median(ms)
    db.log(f"probes: pages {pages}, WAL MB {[round(w, 2) for w in wal]}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="", help="admin DSN (CREATEDB); default: embedded")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--backlog", type=int, default=20_000)
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--fill-like", action="store_true", help="scale.py's set-based fill")
    parser.add_argument("--chunk", type=int, default=500_000)
    parser.add_argument(
        "--archive-after",
        type=float,
        default=None,
        help="run the archiver beside the workers: succeeded jobs move to jobs_archive this"
        " many seconds after they finished (migration 0027)",
    )
    opts = parser.parse_args()
    with db.server(opts.dsn, "") as admin_dsn:
        dsn = db.recreate(admin_dsn, "qe_heap_layout")
        if opts.fill_like:
            seconds = db.fill(dsn, opts.jobs, 0, opts.chunk, 90.0)
            how = f"scale.py's fill, chunks of {opts.chunk:,}"
        else:
            seconds = churn(dsn, opts.jobs, opts.workers, opts.backlog, opts.archive_after)
            how = f"{opts.workers} workers (prefetch 1), backlog <= {opts.backlog:,}"
            if opts.archive_after is not None:
                how += f", succeeded jobs archived after {opts.archive_after:g} s"
        print(f"{opts.jobs:,} jobs written by {how} in {seconds:.0f} s")
        for key, value in layout(dsn, opts.probes).items():
            print(f"  {key:<28}{value:>12,.2f}")


if __name__ == "__main__":
    main()
