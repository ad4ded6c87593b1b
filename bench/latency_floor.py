"""How low can wake latency go on this server? A bare queue beside the engine. Not a test: it prints numbers.

Usage::

    python bench/latency_floor.py                  # 2 idle listeners, 500 jobs at 100/s, 3 rounds
    python bench/latency_floor.py --rounds 5       # bench/README.md's figure

Issue 15 asks for a wake latency (the shared harness's: the producer's clock
before its enqueue call to the handler's first line, idle workers, 100 jobs/s)
under 1.5 ms at the median. This script measures, in the same run and on the
same server, what the least possible queue on Postgres and psycopg gets, so
that the engine's figure can be read against a floor rather than a wish:

- ``round trip``: an idle client's ``SELECT 1``, paced like the jobs. Against
  the same call back to back it shows what waking two sleeping processes (the
  client, its backend) costs on this machine;
- ``floor``: a one-column table, no trigger, no event, no check. The producer
  sends one statement that inserts the row and calls ``pg_notify`` (one
  durable commit, as the engine's enqueue); K listener processes wait in
  ``notifies()`` and claim with one ``UPDATE ... FOR UPDATE SKIP LOCKED
  ... RETURNING`` (asynchronous commit, the engine's worker default); the latency is taken as soon as the claim returns (no
  handler, no bookkeeping, no finish);
- ``engine``: the harness's round on the engine: ``Client.enqueue`` (one
  durable transaction each), K idle ``queue-claim-worker`` processes, the
  handler's first line (``lib.tasks.noop`` returns ``time.time() - t``).

Each is split into the producer's call (the INSERT, the commit and its WAL
flush, the round trip: the job exists and its NOTIFY is sent only when it
returns) and the rest (``wake``: the NOTIFY's delivery, the wake-up, the claim,
and for the engine its bookkeeping and the handler call). The rounds alternate
floor and engine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import psycopg
from lib.builds import alternated
from lib.postgres import fresh_database, server
from lib.report import table
from lib.statements import FLOOR_CLAIM, FLOOR_ENQUEUE, FLOOR_TABLE
from lib.timing import paced, pct
from lib.workers import QUEUE, start_workers, stop_workers, unfinished

from queue_engine import Client


def listener(dsn: str) -> None:
    """A bare worker: wait for a NOTIFY, claim until nothing is left, note each latency."""
    latencies: list[tuple[float, float]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")  # as the engine's worker session
        conn.execute("LISTEN floor")
        print("ready", flush=True)
        while True:
            # Claim outside the notifies() iteration, as the engine's worker does.
            payloads = [n.payload for n in conn.notifies(timeout=1.0, stop_after=1)]
            if "stop" in payloads:
                break
            if not payloads:
                continue
            while True:
                row = conn.execute(FLOOR_CLAIM, prepare=True).fetchone()
                if row is None:
                    break
                t = float(row[0])
                latencies.append((t, time.time() - t))
    print(json.dumps(latencies), flush=True)


def floor_round(admin: str, k: int, m: int, rate: float) -> dict[str, list[float]]:
    """One round of the bare queue: per job, total latency, the producer's call, the rest."""
    with fresh_database(admin) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FLOOR_TABLE)
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--listener", dsn],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(k)
        ]
        try:
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            time.sleep(1.0)
            calls: dict[float, float] = {}
            for _ in paced(m, rate):
                t0 = time.time()
                conn.execute(FLOOR_ENQUEUE, [t0], prepare=True)
                calls[t0] = time.time() - t0
            time.sleep(0.5)
            conn.execute("SELECT pg_notify('floor', 'stop')")
            ran: list[tuple[float, float]] = []
            for p in procs:
                out, _ = p.communicate(timeout=60)
                ran.extend(json.loads(out.strip().splitlines()[-1]))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    if len(ran) != m:
        raise SystemExit(f"the bare queue ran {len(ran)} of {m} jobs")
    # t goes through float8 and back unchanged, so it keys the job's call time.
    return {
        "total": [lat for _, lat in ran],
        "enqueue": [calls[t] for t, _ in ran],
        "wake": [lat - calls[t] for t, lat in ran],
    }


def engine_round(admin: str, k: int, m: int, rate: float) -> dict[str, list[float]]:
    """One round of the engine: per job, total latency, the producer's call, the rest (seconds)."""
    enqueue_s: dict[int, float] = {}
    with fresh_database(admin) as dsn, Client(dsn) as client:
        procs = start_workers(dsn, k)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for _ in range(20):  # warm-up: workers connected and listening
                    client.enqueue("noop", queue=QUEUE)
                deadline = time.monotonic() + 120
                while unfinished(conn) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(1.0)  # idle: every worker waits for a notification
                conn.execute("DELETE FROM queue_engine.jobs")
                for _ in paced(m, rate):
                    t0 = time.time()
                    job = client.enqueue("noop", queue=QUEUE, args={"t": t0})
                    enqueue_s[job.id] = time.time() - t0
                deadline = time.monotonic() + 60
                while unfinished(conn) and time.monotonic() < deadline:
                    time.sleep(0.05)
                rows = conn.execute(
                    "SELECT id, (result)::float8 FROM queue_engine.jobs WHERE status = 'succeeded'"
                ).fetchall()
        finally:
            stop_workers(procs)
    total = [float(r[1]) for r in rows]
    enq = [enqueue_s[int(r[0])] for r in rows]
    return {
        "total": total,
        "enqueue": enq,
        "wake": [t - e for t, e in zip(total, enq, strict=True)],
    }


def round_trips(admin: str, m: int, rate: float) -> dict[str, list[float]]:
    """``SELECT 1`` paced at ``rate`` and back to back: the cost of waking idle processes."""
    paced: list[float] = []
    b2b: list[float] = []
    with psycopg.connect(admin, autocommit=True) as conn:
        for _ in range(m):
            t0 = time.perf_counter()
            conn.execute("SELECT 1", prepare=True).fetchone()
            paced.append(time.perf_counter() - t0)
            time.sleep(1.0 / rate)
        for _ in range(m):
            t0 = time.perf_counter()
            conn.execute("SELECT 1", prepare=True).fetchone()
            b2b.append(time.perf_counter() - t0)
    return {"paced": paced, "back to back": b2b}


def ms(values: list[float], p: float) -> float:
    return pct(sorted(v * 1000 for v in values), p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="", help="an admin DSN (default: an embedded Postgres)")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--listener", metavar="DSN", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.listener:
        listener(opts.listener)
        return
    got: dict[str, list[dict[str, list[float]]]] = {}
    with server(opts.dsn) as admin:
        for r in range(opts.rounds):
            for name in alternated(["floor", "engine"], r):
                round_of = floor_round if name == "floor" else engine_round
                res = round_of(admin, opts.workers, opts.jobs, opts.rate)
                got.setdefault(name, []).append(res)
                print(f"  round {r + 1} {name}: p50 {ms(res['total'], 50):.2f} ms", file=sys.stderr)
            got.setdefault("rtt", []).append(round_trips(admin, 200, opts.rate))

    def med(name: str, part: str, p: float) -> float:
        return statistics.median(ms(rd[part], p) for rd in got[name])

    print(
        f"\nwake latency, {opts.jobs} jobs at {opts.rate:g}/s to {opts.workers} idle listeners,"
        f" ms: median over {opts.rounds} rounds of each round's percentile\n"
    )
    rows = (
        [label, *(f"{med(name, part, p):.2f}" for p in (50, 95, 99))]
        for label, name, part in (
            ("`SELECT 1`, paced", "rtt", "paced"),
            ("`SELECT 1`, back to back", "rtt", "back to back"),
            ("floor: total", "floor", "total"),
            ("floor: insert + notify call", "floor", "enqueue"),
            ("floor: wake to claimed", "floor", "wake"),
            ("engine: total", "engine", "total"),
            ("engine: enqueue call", "engine", "enqueue"),
            ("engine: wake to handler", "engine", "wake"),
        )
    )
    table(["what", "p50", "p95", "p99"], rows)


if __name__ == "__main__":
    main()
