"""Drains with and without the leader's vacuumer, alternated in one run. Not a test.

Usage::

    python bench/claim_vacuum.py                          # K=1, N=10,000 and 30,000, 3 rounds
    python bench/claim_vacuum.py --k 1,4 --jobs 10000 --rounds 5
    python bench/claim_vacuum.py --existing DSN --jobs 60000 --rounds 2   # a big table

Every claim leaves a dead entry at the head of ``jobs_claimable_idx``, which
every later claim steps over until a VACUUM removes it
(``queue_engine/orchestrator/vacuumer.py``). Each measurement is one drain of
``bench/job_cost.py`` (a fresh database, N no-op jobs, K real
``queue-claim-worker`` processes at WARNING, server and worker CPU per job);
in the "vacuumer" rounds the orchestrator's :class:`Vacuumer` service runs in
this process beside the workers (``job_cost.measure``'s ``beside``), at its
defaults (``QUEUE_ENGINE_VACUUM_DEAD_ROWS`` and ``QUEUE_ENGINE_VACUUM_S``
apply), as the orchestrator's leader runs it.
The server CPU includes the VACUUMs. No orchestrator runs otherwise, and
autovacuum looks at the database once a minute: within a drain of these
sizes it does not come.

``--existing DSN``: drain jobs enqueued into queue ``bench`` of an existing
database instead (one worker per K, the same alternation): the scale bench's
10-million-job database (``bench/scale.py --data-dir``), where a VACUUM of
``jobs`` reads a big table's indexes and the pacer spaces them out, and
autovacuum runs at that server's ``autovacuum_naptime`` (15 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import job_cost
import psycopg
from lib.builds import alternated
from lib.postgres import server
from lib.report import table
from lib.workers import WORKER_BIN, bench_left, drain, enqueue_noops, finished_span

from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.vacuumer import Vacuumer


@contextmanager
def vacuumer(dsn: str) -> Iterator[Vacuumer]:
    """The orchestrator's vacuumer on ``dsn``, at its defaults, while the block runs."""
    service = Vacuumer.from_env(dsn, "queue_engine", stagger_s=0)
    if service is None:
        raise SystemExit("QUEUE_ENGINE_VACUUM_DEAD_ROWS=0 turns the vacuumer off")
    service.start()
    try:
        yield service
    finally:
        service.stop()


def drain_existing(dsn: str, n: int, k: int, with_vacuumer: bool) -> dict[str, float]:
    """Enqueue ``n`` jobs into queue bench of ``dsn`` and drain them; per-job figures."""
    ids = enqueue_noops(dsn, n)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        with vacuumer(dsn) if with_vacuumer else nullcontext():
            cpu = drain(conn, dsn, k, left=bench_left)
        done, seconds = finished_span(conn, ids)
    return {
        "jobs_s": done / seconds,
        "server_ms": cpu.server_cpu_s / max(done, 1) * 1000,
        "worker_ms": cpu.worker_cpu_s / max(done, 1) * 1000,
        "stmt_ms": float("nan"),
        "foreign": 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="an existing server (default: an embedded one)")
    parser.add_argument("--k", default="1", help="worker counts, comma-separated")
    parser.add_argument("--jobs", default="10000,30000", help="drain sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--existing", metavar="DSN", help="drain in this database, not fresh ones")
    opts = parser.parse_args()
    ks = [int(x) for x in opts.k.split(",") if x]
    sizes = [int(x) for x in opts.jobs.split(",") if x]
    results: dict[tuple[int, int, str], list[dict[str, float]]] = {}
    serving = (
        nullcontext("") if opts.existing else server(opts.dsn, settings=job_cost.SERVER_SETTINGS)
    )
    with serving as admin:
        for r in range(opts.rounds):
            for n in sizes:
                for k in ks:
                    for label in alternated(("without", "vacuumer"), r):
                        before = metrics.counters().get("vacuums", 0.0)
                        if opts.existing:
                            m = drain_existing(opts.existing, n, k, label == "vacuumer")
                        else:
                            beside = vacuumer if label == "vacuumer" else None
                            m = job_cost.measure(
                                admin, n, k, str(WORKER_BIN), "WARNING", beside=beside
                            )
                        m["vacuums"] = metrics.counters().get("vacuums", 0.0) - before
                        results.setdefault((n, k, label), []).append(m)
                        print(
                            f"  round {r + 1} N={n:,} K={k} {label}: {m['jobs_s']:,.0f} jobs/s,"
                            f" server {m['server_ms']:.3f} + worker {m['worker_ms']:.3f} ms/job,"
                            f" stmt {m['stmt_ms']:.3f} ms, VACUUMs {m['vacuums']:.0f},"
                            f" foreign {m['foreign']:.0%}",
                            file=sys.stderr,
                        )
    print(f"\nmedian of {opts.rounds} alternated rounds, prefetch 1, workers at WARNING\n")
    rows = []
    for (n, k, label), ms in sorted(results.items()):
        med = {key: statistics.median(m[key] for m in ms) for key in ms[0]}
        rows.append(
            [
                f"{n:,}",
                k,
                "on" if label == "vacuumer" else "off",
                f"{med['jobs_s']:,.0f}",
                f"{med['server_ms']:.3f}",
                f"{med['worker_ms']:.3f}",
                f"{med['stmt_ms']:.3f}",
                f"{med['vacuums']:.0f}",
            ]
        )
    header = ["N", "K", "vacuumer", "jobs/s", "server CPU ms/job", "worker CPU ms/job"]
    table([*header, "statement ms", "VACUUMs"], rows)


if __name__ == "__main__":
    main()
