"""Invariant: never more jobs of a concurrency key running than its limit, and every job ends.

Real ``queue-claim-worker`` processes (half of them claiming three jobs at a
time, the batch form of the claim) drain jobs spread over random
concurrency keys with random limits (1 to 3; one key limited by the operator's
``concurrency_limits`` row instead of the jobs), plus plain jobs, while the
test SIGKILLs a busy worker again and again and starts a new one; an
orchestrator gives the killed workers' jobs back. Once, a third of the way,
Postgres itself crashes (``pg_ctl stop -m immediate``: every session and
every transaction advisory lock gone at once) and starts again; the workers
reconnect and go on (with ``QUEUE_ENGINE_TEST_DSN`` the test does not own the
server, and runs without the crash). Checked three ways:

- a sampler counts the running rows of each key many times a second (each
  sample one statement, one snapshot);
- the job events: +1 on each move into ``running``, -1 on each move out of it,
  in event id order; a claim of a key is serialised with every other claim of
  that key and draws its event id after counting the key's running jobs, so
  this order can only undercount, never invent an overrun;
- the handlers' own start and end times (``worker_test_log``): at no instant
  more handlers of a key ran than its limit.

And every job ends ``succeeded``: a job whose key is full is skipped by the
claim, never failed; only the SIGKILLs cost attempts. Design:
docs/internals/flow-control.md.
"""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from support.orchestrators import spawn as spawn_orchestrator
from support.workers import create_log_table, idle_workers, kill_all, spawn_worker, wait_until

WORKERS = 6
KEYS = 4
JOBS_PER_KEY = 40
PLAIN_JOBS = 20
MAX_KILLS = 8


def add_jobs(conn: psycopg.Connection[Any], rng: random.Random) -> dict[str, int]:
    """Insert the jobs in a random order; return each key's limit."""
    # Random limits, each of 1, 2 and 3 at least once.
    drawn = [1, 2, 3] + [rng.randint(1, 3) for _ in range(KEYS - 3)]
    rng.shuffle(drawn)
    limits = {f"key-{k}": limit for k, limit in enumerate(drawn)}
    rows: list[tuple[str | None, int | None, float]] = [
        (key, limit, rng.uniform(0.005, 0.04))
        for key, limit in limits.items()
        for _ in range(JOBS_PER_KEY)
    ] + [(None, None, 0.02) for _ in range(PLAIN_JOBS)]
    rng.shuffle(rows)
    # key-0's limit is the operator's (the jobs say 10): the override is what holds.
    operator_key = "key-0"
    conn.execute(
        "INSERT INTO queue_engine.concurrency_limits (key, max_running) VALUES (%s, %s)",
        (operator_key, limits[operator_key]),
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO queue_engine.jobs (queue, task, args, max_attempts, lease_ttl_s,"
            " concurrency_key, concurrency_limit)"
            " VALUES ('wt', 'record', jsonb_build_object('sleep', %s::float8), 20, 5, %s, %s)",
            [(sleep, key, 10 if key == operator_key else limit) for key, limit, sleep in rows],
        )
    return limits


def spawn(dsn: str, index: int, log: Path) -> subprocess.Popen[bytes]:
    """Worker ``index``: every other one prefetches three jobs (the batch claim ranks a key's)."""
    return spawn_worker(dsn, "--prefetch", "3" if index % 2 else "1", log_file=log)


def most_at_once(points: list[tuple[Any, int, str]]) -> dict[str, int]:
    """The highest running count of each key over ``(order, +1/-1, key)`` points in order."""
    now: dict[str, int] = {}
    most: dict[str, int] = {}
    for _order, step, key in points:
        now[key] = now.get(key, 0) + step
        most[key] = max(most.get(key, 0), now[key])
    return most


class Reconnecting:
    """A connection that opens again after the server crashed under it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: psycopg.Connection[Any] | None = None

    def execute(self, query: str) -> list[tuple[Any, ...]]:
        while True:
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
                return self.conn.execute(query).fetchall()  # type: ignore[arg-type]  # literal SQL
            except psycopg.OperationalError:
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                time.sleep(0.1)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def test_no_key_ever_runs_more_than_its_limit_under_sigkills_and_a_crash(
    dsn: str, pg_server: Any, tmp_path: Path
) -> None:
    rng = random.Random(36)
    crashed: list[float] = []
    create_log_table(dsn)
    procs: list[subprocess.Popen[bytes]] = []
    workers: list[subprocess.Popen[bytes]] = []
    sampled: dict[str, int] = {}
    samples = 0
    stop = threading.Event()
    kills = 0

    def sampler() -> None:
        nonlocal samples
        c = Reconnecting(dsn)
        try:
            while not stop.is_set():
                for key, count in c.execute(
                    "SELECT concurrency_key, count(*) FROM queue_engine.jobs"
                    " WHERE status = 'running' AND concurrency_key IS NOT NULL GROUP BY 1"
                ):
                    sampled[key] = max(sampled.get(key, 0), int(count))
                samples += 1
        finally:
            c.close()

    watcher = threading.Thread(target=sampler, daemon=True)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            procs.append(spawn_orchestrator(dsn, tmp_path / "orchestrator.log", log_level="INFO"))
            for i in range(WORKERS):
                workers.append(spawn(dsn, i, tmp_path / f"w{i}.log"))
            procs.extend(workers)
            wait_until(lambda: idle_workers(conn, "wt") == WORKERS, timeout=90, what="workers idle")
            watcher.start()
            limits = add_jobs(conn, rng)
            total = KEYS * JOBS_PER_KEY + PLAIN_JOBS
            next_kill = time.monotonic() + 0.5

            watch = Reconnecting(dsn)

            def done() -> bool:
                nonlocal next_kill, kills
                row = watch.execute(
                    "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
                    " count(*) FILTER (WHERE status NOT IN ('queued', 'running', 'succeeded'))"
                    " FROM queue_engine.jobs"
                )[0]
                assert row[1] == 0, f"a job ended otherwise: {row}"
                if row[0] == total:
                    return True
                if pg_server.embedded is not None and not crashed and row[0] >= total // 3:
                    # A crash: sessions, transactions and their advisory locks
                    # vanish at once; running rows (the slots) stay running.
                    at = time.monotonic()
                    pg_server.embedded.stop(mode="immediate")
                    time.sleep(0.5)
                    pg_server.embedded.start()
                    crashed.append(time.monotonic() - at)
                    return False
                if kills < MAX_KILLS and time.monotonic() >= next_kill:
                    # A worker in the middle of a keyed job: its slot must stay
                    # taken until the orchestrator gives the job back.
                    busy = {
                        int(r[0])
                        for r in watch.execute(
                            "SELECT w.pid FROM queue_engine.jobs j JOIN queue_engine.workers w"
                            " ON w.id = j.claimed_by WHERE j.status = 'running'"
                            " AND j.concurrency_key IS NOT NULL"
                        )
                    }
                    victims = [i for i, w in enumerate(workers) if w.pid in busy]
                    if victims:
                        index = rng.choice(victims)
                        workers[index].send_signal(signal.SIGKILL)
                        workers[index].wait(10)
                        kills += 1
                        workers[index] = spawn(dsn, index, tmp_path / f"w-{kills}.log")
                        procs.append(workers[index])
                        next_kill = time.monotonic() + rng.uniform(0.3, 0.8)
                return False

            wait_until(done, timeout=240, interval=0.05, what="every job succeeded")
            watch.close()
            stop.set()
            watcher.join(30)
        with psycopg.connect(dsn, autocommit=True) as conn:
            events = conn.execute(
                "SELECT e.id, CASE WHEN e.to_status = 'running' THEN 1 ELSE -1 END,"
                " j.concurrency_key FROM queue_engine.job_events e"
                " JOIN queue_engine.jobs j ON j.id = e.job_id"
                " WHERE j.concurrency_key IS NOT NULL"
                " AND (e.to_status = 'running') <> (e.from_status = 'running')"
                " ORDER BY e.id"
            ).fetchall()
            runs = conn.execute(
                "SELECT l.started, l.ended, j.concurrency_key FROM worker_test_log l"
                " JOIN queue_engine.jobs j ON j.id = l.job_id WHERE j.concurrency_key IS NOT NULL"
            ).fetchall()
            recovered = conn.execute(
                "SELECT count(*) FROM queue_engine.job_events"
                " WHERE from_status = 'running' AND to_status = 'queued'"
            ).fetchone()
    finally:
        stop.set()
        kill_all(procs)
    # Ends sort before starts at one instant: a handler that ended as the
    # next began is not an overlap.
    handler_points = sorted(
        [(r[0], 1, r[2]) for r in runs] + [(r[1], -1, r[2]) for r in runs],
        key=lambda p: (p[0], p[1]),
    )
    by_events = most_at_once([(e[0], e[1], e[2]) for e in events])
    by_handlers = most_at_once(handler_points)
    print(
        f"\nlimits {limits}; most at once: sampled {sampled} ({samples} samples),"
        f" events {by_events}, handlers {by_handlers}; {kills} SIGKILLs,"
        f" {recovered[0] if recovered else 0} jobs given back;",
        f"Postgres crashed and back in {crashed[0]:.1f} s"
        if crashed
        else "no crash (not our server)",
    )
    for key, limit in limits.items():
        assert sampled.get(key, 0) <= limit, (key, sampled, limits)
        assert by_events.get(key, 0) <= limit, (key, by_events, limits)
        assert by_handlers.get(key, 0) <= limit, (key, by_handlers, limits)
    # The limits were reached (the test exercised them), and the kills landed.
    assert any(by_events.get(k, 0) == limit > 1 for k, limit in limits.items()), by_events
    assert kills > 0 and recovered is not None and recovered[0] > 0, (kills, recovered)
    assert crashed or pg_server.embedded is None
    assert len(runs) >= KEYS * JOBS_PER_KEY
