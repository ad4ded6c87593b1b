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
this process during the drain, at its defaults (``QUEUE_ENGINE_VACUUM_DEAD_ROWS``
and ``QUEUE_ENGINE_VACUUM_S`` apply), as the orchestrator's leader runs it.
The server CPU includes the VACUUMs. No orchestrator runs otherwise, and
autovacuum looks at the database once a minute: within a drain of these
sizes it does not come.

``--existing DSN``: drain jobs enqueued into queue ``bench`` of an existing
database instead (one worker per K, the same alternation): the scale bench's
10-million-job database (``bench/scale.py --keep``), where a VACUUM of
``jobs`` reads a big table's indexes and the pacer spaces them out, and
autovacuum runs at that server's ``autovacuum_naptime`` (15 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import job_cost
import psycopg
from scale import bench_left

from queue_engine import Client, metrics
from queue_engine.orchestrator.vacuumer import Vacuumer

WORKER = str(job_cost.WORKER_BIN)


@contextmanager
def vacuumer_during_drains(enabled: bool) -> Iterator[None]:
    """While active, each drain's workers start with a Vacuumer on its database (if ``enabled``)."""
    started: list[Vacuumer] = []
    original = job_cost.start_workers

    def start_workers(dsn: str, *args: Any, **kwargs: Any) -> Any:
        procs = original(dsn, *args, **kwargs)
        if enabled:
            service = Vacuumer.from_env(dsn, "queue_engine", stagger_s=0)
            if service is None:
                raise SystemExit("QUEUE_ENGINE_VACUUM_DEAD_ROWS=0 turns the vacuumer off")
            service.start()
            started.append(service)
        return procs

    def stop_workers(procs: Any) -> None:
        for service in started:
            service.stop()
        original_stop(procs)

    original_stop = job_cost.stop_workers
    job_cost.start_workers = start_workers
    job_cost.stop_workers = stop_workers
    try:
        yield
    finally:
        job_cost.start_workers = original
        job_cost.stop_workers = original_stop


def drain_existing(dsn: str, n: int, k: int, vacuumer: bool) -> dict[str, float]:
    """Enqueue ``n`` jobs into queue bench of ``dsn`` and drain them; per-job figures."""
    with Client(dsn) as client:
        ids: list[int] = []
        for start in range(0, n, 1000):
            ids += client.enqueue_many(
                [{"task": "noop", "queue": job_cost.QUEUE} for _ in range(min(1000, n - start))]
            )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        pids = job_cost.server_pids(conn)
        server_before = job_cost.cpu_seconds(pids)
        with vacuumer_during_drains(vacuumer):
            procs = job_cost.start_workers(dsn, k, 1, {}, WORKER, "WARNING")
            try:
                while bench_left(conn):
                    time.sleep(0.1)
                server_cpu = job_cost.cpu_seconds(job_cost.server_pids(conn)) - server_before
                worker_cpu = job_cost.cpu_seconds([p.pid for p in procs])
            finally:
                job_cost.stop_workers(procs)
        row = conn.execute(
            "SELECT count(*), extract(epoch FROM max(finished_at) - min(started_at))"
            " FROM queue_engine.jobs_all WHERE id BETWEEN %s AND %s AND status = 'succeeded'",
            (min(ids), max(ids)),
        ).fetchone()
    assert row is not None
    done, seconds = int(row[0]), float(row[1] or 1)
    return {
        "jobs_s": done / seconds,
        "server_ms": server_cpu / max(done, 1) * 1000,
        "worker_ms": worker_cpu / max(done, 1) * 1000,
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
    serving = nullcontext("") if opts.existing else job_cost.server(opts.dsn)
    with serving as admin:
        for r in range(opts.rounds):
            order = ("without", "vacuumer") if r % 2 == 0 else ("vacuumer", "without")
            for n in sizes:
                for k in ks:
                    for label in order:
                        before = metrics.counters().get("vacuums", 0.0)
                        if opts.existing:
                            m = drain_existing(opts.existing, n, k, label == "vacuumer")
                        else:
                            with vacuumer_during_drains(label == "vacuumer"):
                                m = job_cost.measure(admin, n, k, WORKER, "WARNING")
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
    print(
        "| N | K | vacuumer | jobs/s | server CPU ms/job | worker CPU ms/job | statement ms | VACUUMs |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (n, k, label), ms in sorted(results.items()):
        med = {key: statistics.median(m[key] for m in ms) for key in ms[0]}
        print(
            f"| {n:,} | {k} | {'on' if label == 'vacuumer' else 'off'} | {med['jobs_s']:,.0f} |"
            f" {med['server_ms']:.3f} | {med['worker_ms']:.3f} | {med['stmt_ms']:.3f} |"
            f" {med['vacuums']:.0f} |"
        )


if __name__ == "__main__":
    main()
