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

Two more contestants, alternated with them in the same chunks, give the
floor of a single enqueue on this server, in its commit mode (fsync and
``synchronous_commit`` on, one commit per job): ``bare psycopg`` is a
prepared one-row ``INSERT INTO bare_jobs DEFAULT VALUES RETURNING id`` (a
table of one identity column, no index but its key, no trigger) on an
autocommit psycopg connection, and ``bare asyncpg`` the same statement on an
asyncpg connection. No job queue can enqueue durably faster than these from
the same driver: whatever a queue adds (its row's columns and indexes, its
checks, its NOTIFY, its events) comes on top.
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
        names = ("qe", "pgq", "bare psycopg", "bare asyncpg")
        totals = {name: {"wall": 0.0, "client": 0.0, "server": 0.0, "n": 0} for name in names}
        bare_ddl = "CREATE TABLE bare_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY)"
        bare_insert = "INSERT INTO bare_jobs DEFAULT VALUES RETURNING id"
        await apg.execute(bare_ddl)
        bare = psycopg.connect(qe_dsn, autocommit=True, prepare_threshold=0)
        bare.execute(bare_ddl)
        bare_apg = await asyncpg.connect(pgq_dsn)
        bare_apg_insert = await bare_apg.prepare(bare_insert)
        backends = {
            "bare psycopg": bare.info.backend_pid,
            "bare asyncpg": bare_apg.get_server_pid(),
        }
        with Client(qe_dsn, pool_size=1) as client:
            client.enqueue("noop", queue="bench", args={})
            with client._open_pool().connection() as pooled:
                qe_backend = pooled.info.backend_pid
            backends["qe"] = qe_backend
            backends["pgq"] = apg.get_server_pid()
            await queries.enqueue("noop", None)
            bare.execute(bare_insert).fetchone()
            await bare_apg_insert.fetchval()
            for index in range(options.chunks):
                order = names if index % 2 == 0 else names[::-1]
                for name in order:
                    backend = backends[name]
                    s0, c0 = cpu(backend), me.cpu_times()
                    t0 = time.perf_counter()
                    if name == "qe":
                        for _ in range(options.chunk):
                            client.enqueue("noop", queue="bench", args={})
                    elif name == "pgq":
                        for _ in range(options.chunk):
                            await queries.enqueue("noop", None)
                    elif name == "bare psycopg":
                        for _ in range(options.chunk):
                            bare.execute(bare_insert).fetchone()
                    else:
                        for _ in range(options.chunk):
                            await bare_apg_insert.fetchval()
                    t1 = time.perf_counter()
                    c1, s1 = me.cpu_times(), cpu(backend)
                    row = totals[name]
                    row["wall"] += t1 - t0
                    row["client"] += (c1.user + c1.system) - (c0.user + c0.system)
                    row["server"] += s1 - s0
                    row["n"] += options.chunk
        await apg.close()
        await bare_apg.close()
        bare.close()
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
        for name in ("bare psycopg", "bare asyncpg"):
            floor = totals[name]["wall"] / totals[name]["n"]
            for system in ("qe", "pgq"):
                share = floor / (totals[system]["wall"] / totals[system]["n"])
                print(f"{system} at {share:.0%} of the {name} floor")
    finally:
        pg.destroy()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
