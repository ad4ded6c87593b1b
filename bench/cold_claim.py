"""What an idle worker's wake costs, step by step, and what its claim costs after a pause. Not a test: it prints numbers.

Usage::

    python bench/cold_claim.py                 # both parts, embedded durable Postgres
    python bench/cold_claim.py --only claim --n 400

Issue 15's wake latency (producer's clock before ``enqueue`` to the
handler's first line, idle workers, 100 jobs/s) is 0.2-0.4 ms above what a
bare queue does on the same server (``latency_floor.py``). Two parts say
where:

- ``split``: K idle workers run in processes of this script, each the real
  :class:`~queue_engine.worker.loop.Worker` with its notification handler,
  its finish-and-claim and the task timed on the shared monotonic clock
  (paced jobs, ``--log-level WARNING`` as the shared harness): per job, the
  producer's ``enqueue`` call, its start to the worker's NOTIFY, the NOTIFY
  to the claim sent, the claim statement, the claim's answer to the handler.
  Claim statements per job count the other idle workers' claims too.
- ``claim``: one session claims one job at a time, each right after the job
  was enqueued and a pause of 20 ms (an idle worker's backend, and the CPU's
  caches, gone cold) or 0.5 ms: the engine's idle claim (the worker's own
  statement) against a bare ``UPDATE ... SKIP LOCKED`` of the same
  ``jobs`` table and one of a one-column table (``latency_floor.py``'s),
  alternated job by job.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from lib.postgres import fresh_database, server
from lib.report import table
from lib.statements import BARE_CLAIM, FLOOR_CLAIM, FLOOR_TABLE, statement
from lib.timing import pct

from queue_engine import Client
from queue_engine.foundation.sql import compiler
from queue_engine.worker import store

QUEUE = "coldclaim"
PAUSES_S = {"after 20 ms": 0.020, "after 0.5 ms": 0.0005}


def ms(values: list[float], p: float) -> str:
    return f"{1000 * pct(sorted(values), p):.3f}" if values else "-"


# -- claim: the statement after a pause --------------------------------------------


def claim_part(admin: str, n: int) -> None:
    with (
        fresh_database(admin) as dsn,
        Client(dsn) as client,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        store.configure_session(conn, synchronous_commit="off")  # the worker's default session
        conn.execute(FLOOR_TABLE)
        params = store.statement_params(
            "queue_engine",
            worker_id="w1",
            queue=QUEUE,
            outcomes=[],
            claim_limit=1,
            lease_ttl_s=60,
            gate=store.ClaimGate(host="bench"),
        )
        statements = {
            "engine's idle claim": statement(store.worker_tags(0, 1)),
            "bare UPDATE of jobs": compiler.RawStatement(BARE_CLAIM, ("worker_id", "queue")),
            "one-column table": compiler.RawStatement(FLOOR_CLAIM, ()),
        }
        times: dict[tuple[str, str], list[float]] = {
            (name, pause): [] for name in statements for pause in PAUSES_S
        }
        for i in range(n + 10):
            for pause, pause_s in PAUSES_S.items():
                for name, claim in statements.items():
                    if name == "one-column table":
                        conn.execute("INSERT INTO floor_jobs (t) VALUES (0)")
                    else:
                        client.enqueue("cold", queue=QUEUE)
                    time.sleep(pause_s)
                    t = time.perf_counter()
                    rows = store.execute_raw(conn, claim, params).fetchall()
                    took = time.perf_counter() - t
                    assert rows, f"{name} claimed nothing"
                    if i >= 10:  # the first ones prepare the statements
                        times[(name, pause)].append(took)
    print(f"\nthe claim statement, {n} each, alternated job by job, ms (call to answer)\n")
    table(
        ["statement", "pause", "p25", "p50", "p90"],
        (
            [name, pause, *(ms(values, p) for p in (25, 50, 90))]
            for (name, pause), values in times.items()
        ),
    )


# -- split: the wake path of idle workers -------------------------------------------


def split_worker(dsn: str, out: str) -> None:
    """One idle worker in this process, its steps timed (CLOCK_MONOTONIC, shared by processes)."""
    from queue_engine.foundation.logs import setup_logging
    from queue_engine.producer.tasks import load_app
    from queue_engine.worker.loop import Worker
    from queue_engine.worker.settings import WorkerSettings

    handled: list[tuple[int, float]] = []

    import queue_engine

    @queue_engine.task("cold", queue=QUEUE)
    def cold(args: dict[str, Any]) -> None:
        handled.append((int(args.get("i", -1)), time.perf_counter()))

    with tempfile.TemporaryFile("w") as log:
        sys.stderr = log
        setup_logging("text", "WARNING")
        worker = Worker(WorkerSettings(queue=QUEUE, app=__name__, dsn=dsn), load_app(__name__))
        notified: list[float] = []
        claims: list[tuple[float, float, list[int]]] = []
        on_notify = worker.connection._on_notify

        def timed_notify(notify: psycopg.Notify) -> None:
            if notify.channel == worker.jobs_channel:
                notified.append(time.perf_counter())
            on_notify(notify)

        finish_and_claim = store.finish_and_claim

        def timed_claim(*args: Any, **kwargs: Any) -> store.FinishClaimResult:
            t = time.perf_counter()
            result = finish_and_claim(*args, **kwargs)
            ids = [int(j.args.get("i", -1)) for j in result.claimed]
            claims.append((t, time.perf_counter(), ids))
            return result

        worker.connection._on_notify = timed_notify  # type: ignore[method-assign]
        store.finish_and_claim = timed_claim  # type: ignore[assignment]
        signal.signal(signal.SIGTERM, lambda *_: worker.stop())
        worker.run()
    Path(out).write_text(json.dumps({"notified": notified, "claims": claims, "handled": handled}))


def split_part(admin: str, k: int, m: int, rate: float) -> None:
    steps: dict[str, list[float]] = {
        s: []
        for s in ("total", "enqueue call", "to NOTIFY", "NOTIFY to claim", "claim", "to handler")
    }
    with fresh_database(admin) as dsn, Client(dsn) as client:
        outs = [tempfile.mktemp(prefix="qe-coldclaim-") for _ in range(k)]
        procs = [
            subprocess.Popen([sys.executable, __file__, "--split-worker", dsn, out]) for out in outs
        ]
        sent: dict[int, tuple[float, float]] = {}
        try:
            for _ in range(10):
                client.enqueue("cold", queue=QUEUE, args={"i": -1})
            time.sleep(3.0)  # started, warmed, idle
            for i in range(m):
                t0 = time.perf_counter()
                client.enqueue("cold", queue=QUEUE, args={"i": i})
                sent[i] = (t0, time.perf_counter())
                time.sleep(1.0 / rate)
            time.sleep(1.0)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(30)
        claims_total = 0
        for out in outs:
            data = json.loads(Path(out).read_text())
            os.unlink(out)
            claims_total += len(data["claims"])
            handled = {i: t for i, t in data["handled"]}
            for started, answered, ids in data["claims"]:
                for i in ids:
                    if i < 0 or i not in handled:
                        continue
                    woken = max((t for t in data["notified"] if t <= started), default=None)
                    t0, returned = sent[i]
                    steps["total"].append(handled[i] - t0)
                    steps["enqueue call"].append(returned - t0)
                    steps["claim"].append(answered - started)
                    steps["to handler"].append(handled[i] - answered)
                    if woken is not None:
                        steps["to NOTIFY"].append(woken - t0)
                        steps["NOTIFY to claim"].append(started - woken)
    jobs = len(steps["total"])
    print(
        f"\nwake path, {k} idle worker(s), {jobs} jobs at {rate:g}/s, "
        f"{claims_total / max(1, jobs):.2f} claim statements per job, ms\n"
    )
    table(["step", "p50", "p90"], ([step, ms(v, 50), ms(v, 90)] for step, v in steps.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="", help="an admin DSN (default: an embedded Postgres)")
    parser.add_argument("--only", choices=("split", "claim"))
    parser.add_argument("--n", type=int, default=200, help="claims per statement and pause")
    parser.add_argument("--jobs", type=int, default=300, help="paced jobs of the split")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--workers", default="1,2", help="idle workers of the split, per round")
    parser.add_argument("--split-worker", nargs=2, metavar=("DSN", "OUT"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.split_worker:
        split_worker(*opts.split_worker)
        return
    with server(opts.dsn) as admin:
        if opts.only in (None, "split"):
            for k in (int(x) for x in opts.workers.split(",")):
                split_part(admin, k, opts.jobs, opts.rate)
        if opts.only in (None, "claim"):
            claim_part(admin, opts.n)


if __name__ == "__main__":
    main()
