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

``--ceilings`` adds two more, the engine's own statement with less and less
around it, to say what a faster client or a cheaper schema could win at most:
``qe statement`` sends ``enqueue_plain.sql`` with the parameters the client
would send, from a plain autocommit connection (no validation, no ``Job``, no
pool: the client's Python left out); ``qe statement, no notify, no rules`` the
same on a database without the ``jobs_check_row`` trigger (the row's rules,
and the wake-up since migration 0026): what the job row itself, its columns,
defaults and index entries, costs over the bare table. (The wake-up alone was
measured on schema 25, where it was a trigger of its own; since migration 0028
the statement needs a newer schema: bench/runs/2026-11-27-log.md, "Ceilings".)
"""

from __future__ import annotations

import argparse
import asyncio
import time

import psutil
import psycopg
from lib.postgres import server
from lib.report import table
from lib.timing import cpu_seconds

#: ``--ceilings``: contestant -> (its database, the triggers of jobs dropped there).
CEILINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "qe statement": ("qe", ()),
    "qe statement, no notify, no rules": ("qe_norules", ("jobs_check_row",)),
}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument(
        "--ceilings",
        action="store_true",
        help="also the engine's statement alone, without its wake-up, without its rules",
    )
    options = parser.parse_args()

    import asyncpg
    from pgqueuer import Queries

    from queue_engine import Client
    from queue_engine.foundation.migrate import Migrator
    from queue_engine.producer import operations as ops

    with server() as admin:
        ceilings = CEILINGS if options.ceilings else {}
        databases = dict.fromkeys(["qe", "pgq", *(db for db, _ in ceilings.values())])

        def dsn_of(database: str) -> str:
            """The database's URI (asyncpg takes URIs only)."""
            return admin.replace("/postgres?", f"/{database}?")

        with psycopg.connect(admin, autocommit=True) as conn:
            for database in databases:
                conn.execute(f"CREATE DATABASE {database}")
        qe_dsn, pgq_dsn = dsn_of("qe"), dsn_of("pgq")
        for database in databases:
            if database != "pgq":
                Migrator(dsn_of(database)).up()
        spec = ops.job_spec("noop", queue="bench", args={})
        statement = ops.enqueue_statement("queue_engine", spec)
        statement_cursors: dict[str, psycopg.Cursor[tuple[object, ...]]] = {}
        for name, (database, dropped) in ceilings.items():
            conn = psycopg.connect(dsn_of(database), autocommit=True, prepare_threshold=0)
            for trigger in dropped:
                conn.execute(f"DROP TRIGGER {trigger} ON queue_engine.jobs")
            cursor = statement_cursors[name] = conn.cursor()
            cursor.execute(statement.query, statement.params, prepare=True).fetchone()
        apg = await asyncpg.connect(pgq_dsn)
        queries = Queries.from_asyncpg_connection(apg)
        await queries.install()
        me = psutil.Process()
        names = ("qe", "pgq", "bare psycopg", "bare asyncpg", *statement_cursors)
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
            **{name: c.connection.info.backend_pid for name, c in statement_cursors.items()},
        }
        with Client(qe_dsn, pool_size=1) as client:
            client.enqueue("noop", queue="bench", args={})
            with client._connection(None) as pooled:
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
                    s0, c0 = cpu_seconds([backend]), me.cpu_times()
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
                    elif name == "bare asyncpg":
                        for _ in range(options.chunk):
                            await bare_apg_insert.fetchval()
                    else:
                        cursor = statement_cursors[name]
                        for _ in range(options.chunk):
                            cursor.execute(statement.query, statement.params, prepare=True)
                            cursor.fetchone()
                    t1 = time.perf_counter()
                    c1, s1 = me.cpu_times(), cpu_seconds([backend])
                    row = totals[name]
                    row["wall"] += t1 - t0
                    row["client"] += (c1.user + c1.system) - (c0.user + c0.system)
                    row["server"] += s1 - s0
                    row["n"] += options.chunk
        await apg.close()
        await bare_apg.close()
        bare.close()
        for cursor in statement_cursors.values():
            cursor.connection.close()
        print(f"{options.chunks} chunks of {options.chunk} single enqueues per system, alternated")
        table(
            ["system", "jobs/s", "wall us/job", "client CPU us/job", "server backend CPU us/job"],
            (
                [
                    name,
                    f"{row['n'] / row['wall']:,.0f}",
                    *(f"{1e6 * row[k] / row['n']:.0f}" for k in ("wall", "client", "server")),
                ]
                for name, row in totals.items()
            ),
        )

        def per_job(name: str) -> float:
            return totals[name]["wall"] / totals[name]["n"]

        print(f"queue-engine / pgqueuer throughput: {per_job('pgq') / per_job('qe'):.2f}x")
        for name in ("bare psycopg", "bare asyncpg"):
            for system in ("qe", "pgq"):
                print(f"{system} at {per_job(name) / per_job(system):.0%} of the {name} floor")
        for name in statement_cursors:
            print(f"{name} / pgqueuer throughput: {per_job('pgq') / per_job(name):.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
