"""Single enqueue, queue-engine against pgqueuer, interleaved in chunks. Not a test.

Run with the shared harness's venv (it has pgqueuer and asyncpg; install this
checkout into it with ``pip install -e``)::

    ../shared-bench-copy/.venv/bin/python bench/enqueue_vs_pgqueuer.py --chunks 20 --chunk 250

On a machine busy with other work, separate measurements minutes apart
compare the load of those minutes more than the two systems. This puts both
on one embedded server (fsync on) and alternates them every ``--chunk``
enqueues, each call as the shared harness makes it (``Client(dsn).enqueue``,
one transaction each; pgqueuer's ``Queries.enqueue`` on an asyncpg connection,
autocommit), and sums per system: wall time, the process's CPU, and the CPU
of the server backend that served it.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import psycopg


def cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=250)
    options = parser.parse_args()

    import asyncpg
    from pgqueuer import Queries

    from queue_engine import Client
    from queue_engine.embedded import EmbeddedPostgres
    from queue_engine.migrate import Migrator

    folder = Path(tempfile.mkdtemp(prefix="qe-vs-pgq-"))
    pg = EmbeddedPostgres(folder / "data")
    admin = pg.start()
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE qe")
            conn.execute("CREATE DATABASE pgq")
        qe_dsn = admin.replace("/postgres?", "/qe?")
        pgq_dsn = admin.replace("/postgres?", "/pgq?")
        Migrator(qe_dsn).up()
        apg = await asyncpg.connect(pgq_dsn)
        queries = Queries.from_asyncpg_connection(apg)
        await queries.install()
        me = psutil.Process()
        totals = {
            name: {"wall": 0.0, "client": 0.0, "server": 0.0, "n": 0} for name in ("qe", "pgq")
        }
        with Client(qe_dsn, pool_size=1) as client:
            client.enqueue("noop", queue="bench", args={})
            with client._open_pool().connection() as pooled:
                qe_backend = pooled.info.backend_pid
            pgq_backend = apg.get_server_pid()
            await queries.enqueue("noop", None)
            for index in range(options.chunks):
                order = ("qe", "pgq") if index % 2 == 0 else ("pgq", "qe")
                for name in order:
                    backend = qe_backend if name == "qe" else pgq_backend
                    s0, c0 = cpu(backend), me.cpu_times()
                    t0 = time.perf_counter()
                    if name == "qe":
                        for _ in range(options.chunk):
                            client.enqueue("noop", queue="bench", args={})
                    else:
                        for _ in range(options.chunk):
                            await queries.enqueue("noop", None)
                    t1 = time.perf_counter()
                    c1, s1 = me.cpu_times(), cpu(backend)
                    row = totals[name]
                    row["wall"] += t1 - t0
                    row["client"] += (c1.user + c1.system) - (c0.user + c0.system)
                    row["server"] += s1 - s0
                    row["n"] += options.chunk
        await apg.close()
        print(f"{options.chunks} chunks of {options.chunk} single enqueues per system, alternated")
        print("| system | jobs/s | wall us/job | client CPU us/job | server backend CPU us/job |")
        print("|---|---|---|---|---|")
        for name, row in totals.items():
            n = row["n"]
            print(
                f"| {name} | {n / row['wall']:,.0f} | {1e6 * row['wall'] / n:.0f} | "
                f"{1e6 * row['client'] / n:.0f} | {1e6 * row['server'] / n:.0f} |"
            )
        ratio = (totals["pgq"]["wall"] / totals["pgq"]["n"]) / (
            totals["qe"]["wall"] / totals["qe"]["n"]
        )
        print(f"queue-engine / pgqueuer throughput: {ratio:.2f}x")
    finally:
        pg.destroy()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
