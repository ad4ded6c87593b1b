"""Load check of queue-web: ``POST /api/v1/jobs`` at a steady rate from many clients.

Not a test: it prints numbers. It starts a real ``queue-web`` process (the
console script of this virtualenv) on a fresh, migrated database, then runs
``--clients`` client threads, each with its own keep-alive HTTP connection,
that together send ``--rate`` requests per second for ``--seconds`` seconds
(open loop: request *i* is due at ``start + i / rate`` whatever happened to
the others, so a slow server shows up as latency and as a lower rate held,
not as a quietly slower sender). Latency is measured from the moment a
request was due to the moment its answer arrived, so time spent waiting for
a free client counts (no coordinated omission).

Usage::

    python bench/web_load.py                          # embedded Postgres, 200/s, 32 clients, 20 s
    python bench/web_load.py --rate 400 --clients 64 --seconds 30
    python bench/web_load.py --dsn postgresql://postgres@localhost/postgres

With ``--dsn`` (or ``QUEUE_ENGINE_DSN``) the DSN is an admin connection: the
script creates and drops one database on that server (CREATEDB needed).
Without, it starts an embedded Postgres with the server's default settings
(fsync on, synchronous_commit on) and deletes it at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import statistics
import threading
import time
from urllib.parse import urlsplit

from lib.postgres import fresh_database, server
from lib.timing import pct
from lib.web import queue_web

TOKEN = "bench-producer-token-0123456789"


def client_loop(
    port: int, due: queue.Queue[float | None], latencies: list[float], errors: list[int]
) -> None:
    """Send one POST per due time taken from the queue, on one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    n = 0
    while True:
        when = due.get()
        if when is None:
            break
        delay = when - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        n += 1
        body = json.dumps({"task": "bench.noop", "queue": "web", "args": {"n": n}})
        try:
            conn.request("POST", "/api/v1/jobs", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
        except OSError:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            status = 0
        done = time.perf_counter()
        if status == 201:
            latencies.append(done - when)
        else:
            errors.append(status)
    conn.close()


def run(port: int, rate: float, clients: int, seconds: float) -> dict[str, float]:
    """Drive the load; return the figures."""
    due: queue.Queue[float | None] = queue.Queue()
    latencies: list[float] = []
    errors: list[int] = []
    threads = [
        threading.Thread(target=client_loop, args=(port, due, latencies, errors), daemon=True)
        for _ in range(clients)
    ]
    for t in threads:
        t.start()
    total = int(rate * seconds)
    start = time.perf_counter() + 0.2
    for i in range(total):
        due.put(start + i / rate)
    for _ in threads:
        due.put(None)
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    ordered = sorted(latencies)

    return {
        "sent": total,
        "ok": len(latencies),
        "errors": len(errors),
        "elapsed_s": elapsed,
        "rate_held": len(latencies) / elapsed,
        "p50_ms": pct(ordered, 50) * 1000,
        "p90_ms": pct(ordered, 90) * 1000,
        "p99_ms": pct(ordered, 99) * 1000,
        "max_ms": ordered[-1] * 1000 if ordered else 0.0,
        "mean_ms": statistics.fmean(ordered) * 1000 if ordered else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("QUEUE_ENGINE_DSN", ""))
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second, in all")
    parser.add_argument("--clients", type=int, default=32, help="concurrent HTTP clients")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--pool-size", type=int, default=8, help="queue-web's database pool")
    args = parser.parse_args()
    env = {
        "QUEUE_ENGINE_WEB_TOKENS": f"producer:{TOKEN}",
        "QUEUE_ENGINE_WEB_POOL_SIZE": str(args.pool_size),
    }
    with server(args.dsn) as admin, fresh_database(admin) as dsn, queue_web(dsn, env) as base:
        port = urlsplit(base).port or 80
        run(port, min(args.rate, 50.0), min(args.clients, 8), 2.0)  # warm-up
        figures = run(port, args.rate, args.clients, args.seconds)
    print(
        f"POST /api/v1/jobs: target {args.rate:g}/s from {args.clients} clients for "
        f"{args.seconds:g}s (pool {args.pool_size})"
    )
    print(
        f"  held {figures['rate_held']:.1f}/s  ok {figures['ok']:.0f}/{figures['sent']:.0f}  "
        f"errors {figures['errors']:.0f}"
    )
    print(
        f"  latency p50 {figures['p50_ms']:.1f} ms  p90 {figures['p90_ms']:.1f} ms  "
        f"p99 {figures['p99_ms']:.1f} ms  max {figures['max_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
