"""Single enqueue on this build's schema against an older schema, interleaved. Not a test.

Usage::

    python bench/enqueue_schema_ab.py --base-version 14 --chunks 20 --chunk 200
    python bench/enqueue_schema_ab.py --base-version 25 --chunks 20 --chunk 10 --bulk 1000

One embedded server (fsync on, ``synchronous_commit`` on), two databases: one
migrated to the head of this build, one migrated and then taken down to
``--base-version`` (so the schema is the older build's, the client code the
same). Single enqueues as the shared harness makes them
(``Client(dsn).enqueue("noop", queue="bench", args={})``, one transaction each)
alternate between the two every ``--chunk`` calls, in ABBA order; per chunk it
records wall time, this process's CPU, and the CPU of the server backend
that served it (psutil), and prints the medians over chunks and each chunk.
With ``--bulk N`` each call is instead ``enqueue_many`` of N jobs (the
harness's bulk call), and the figures are per job.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psutil
import psycopg

from queue_engine import Client
from queue_engine.embedded import EmbeddedPostgres
from queue_engine.migrate import Migrator


def cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-version", type=int, required=True)
    parser.add_argument("--chunks", type=int, default=20, help="chunks per schema")
    parser.add_argument("--chunk", type=int, default=200, help="calls per chunk")
    parser.add_argument("--bulk", type=int, default=0, help="jobs per enqueue_many call")
    options = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="qe-schema-ab-"))
    pg = EmbeddedPostgres(folder / "data")
    admin = pg.start()
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE qe_base")
            conn.execute("CREATE DATABASE qe_new")
        dsns = {"base": pg.dsn("qe_base"), "new": pg.dsn("qe_new")}
        for dsn in dsns.values():
            Migrator(dsn).up()
        Migrator(dsns["base"]).down(options.base_version)
        clients = {name: Client(dsn, pool_size=1) for name, dsn in dsns.items()}
        backends = {}
        for name, client in clients.items():
            client.enqueue("noop", queue="bench", args={})
            with client._connection(None) as pooled:
                backends[name] = pooled.info.backend_pid
        batch = [{"task": "noop", "queue": "bench", "args": {}}] * options.bulk

        def call(client: Client) -> None:
            if options.bulk:
                client.enqueue_many(batch)
            else:
                client.enqueue("noop", queue="bench", args={})

        me = psutil.Process()
        rows: dict[str, list[tuple[float, float, float]]] = {"base": [], "new": []}
        for index in range(options.chunks):
            order = ("base", "new") if index % 2 == 0 else ("new", "base")
            for name in order:
                client, backend = clients[name], backends[name]
                s0, c0 = cpu(backend), me.cpu_times()
                t0 = time.perf_counter()
                for _ in range(options.chunk):
                    call(client)
                t1 = time.perf_counter()
                c1, s1 = me.cpu_times(), cpu(backend)
                n = options.chunk * max(options.bulk, 1)
                rows[name].append(
                    (
                        1e6 * (t1 - t0) / n,
                        1e6 * ((c1.user + c1.system) - (c0.user + c0.system)) / n,
                        1e6 * (s1 - s0) / n,
                    )
                )
        for client in clients.values():
            client.close()
        kind = f"enqueue_many calls of {options.bulk}" if options.bulk else "single enqueues"
        print(
            f"{options.chunks} chunks of {options.chunk} {kind} per schema, "
            f"alternated (base = schema version {options.base_version})"
        )
        print(
            "| schema | jobs/s (median chunk) | wall us/job | client CPU us/job | backend CPU us/job |"
        )
        print("|---|---|---|---|---|")
        medians = {}
        for name, chunks in rows.items():
            wall, client_cpu, server = (statistics.median(c[i] for c in chunks) for i in range(3))
            medians[name] = wall
            digits = 1 if options.bulk else 0
            print(
                f"| {name} | {1e6 / wall:,.0f} | {wall:.{digits}f} | {client_cpu:.{digits}f} "
                f"| {server:.{digits}f} |"
            )
        print(f"new / base throughput (medians): {medians['base'] / medians['new']:.2f}x")
        print("\nper chunk (wall us/job, backend CPU us/job):")
        for name, chunks in rows.items():
            print(f"  {name}: " + " ".join(f"{w:.0f}/{s:.0f}" for w, _, s in chunks))
    finally:
        pg.destroy()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
