"""How low can wake latency go on this server? A bare queue beside the engine. Not a test: it prints numbers.

Usage::

    python bench/latency_floor.py                  # 2 idle listeners, 500 jobs at 100/s, 3 rounds

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
- ``engine``: ``bench/wake_latency.py``'s round (``Client.enqueue``, K idle
  ``queue-claim-worker`` processes, the handler's first line).

Each is split into the producer's call and the rest (``wake``). The rounds
alternate floor and engine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wake_latency import add_scenario_options, measure, server  # a sibling script
from worker_bench import WORKER_BIN, fresh_database, pct

SETUP = "CREATE TABLE floor_jobs (id bigserial PRIMARY KEY, t float8 NOT NULL, claimed bool NOT NULL DEFAULT false)"
ENQUEUE = (
    "WITH j AS (INSERT INTO floor_jobs (t) VALUES (%s) RETURNING id) "
    "SELECT pg_notify('floor', 'job') FROM j"
)
CLAIM = (
    "UPDATE floor_jobs SET claimed = true WHERE id = ("
    "SELECT id FROM floor_jobs WHERE NOT claimed ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    ") RETURNING t"
)


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
                row = conn.execute(CLAIM, prepare=True).fetchone()
                if row is None:
                    break
                t = float(row[0])
                latencies.append((t, time.time() - t))
    print(json.dumps(latencies), flush=True)


def floor_round(admin: str, k: int, m: int, rate: float) -> dict[str, list[float]]:
    """One round of the bare queue: per job, total latency, the producer's call, the rest."""
    with fresh_database(admin) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP)
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
            next_at = time.monotonic()
            for _ in range(m):
                next_at += 1.0 / rate
                t0 = time.time()
                conn.execute(ENQUEUE, [t0], prepare=True)
                calls[t0] = time.time() - t0
                pause = next_at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
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
    add_scenario_options(parser)
    parser.add_argument("--listener", metavar="DSN", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.listener:
        listener(opts.listener)
        return
    got: dict[str, list[dict[str, list[float]]]] = {}
    with server(opts.dsn) as admin:
        for r in range(opts.rounds):
            order = ["floor", "engine"] if r % 2 == 0 else ["engine", "floor"]
            for name in order:
                if name == "floor":
                    res = floor_round(admin, opts.workers, opts.jobs, opts.rate)
                else:
                    res = measure(admin, str(WORKER_BIN), opts.workers, opts.jobs, opts.rate)
                got.setdefault(name, []).append(res)
                print(f"  round {r + 1} {name}: p50 {ms(res['total'], 50):.2f} ms", file=sys.stderr)
            got.setdefault("rtt", []).append(round_trips(admin, 200, opts.rate))

    def med(name: str, part: str, p: float) -> float:
        return statistics.median(ms(rd[part], p) for rd in got[name])

    print(
        f"\nwake latency, {opts.jobs} jobs at {opts.rate:g}/s to {opts.workers} idle listeners,"
        f" ms: median over {opts.rounds} rounds of each round's percentile\n"
    )
    print("| what | p50 | p95 | p99 |")
    print("|---|---|---|---|")
    for label, name, part in (
        ("`SELECT 1`, paced", "rtt", "paced"),
        ("`SELECT 1`, back to back", "rtt", "back to back"),
        ("floor: total", "floor", "total"),
        ("floor: insert + notify call", "floor", "enqueue"),
        ("floor: wake to claimed", "floor", "wake"),
        ("engine: total", "engine", "total"),
        ("engine: enqueue call", "engine", "enqueue"),
        ("engine: wake to handler", "engine", "wake"),
    ):
        cells = " | ".join(f"{med(name, part, p):.2f}" for p in (50, 95, 99))
        print(f"| {label} | {cells} |")


if __name__ == "__main__":
    main()
