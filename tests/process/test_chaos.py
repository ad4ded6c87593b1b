"""Chaos: drain thousands of jobs while workers are SIGKILLed at random and restarted.

A ``queue-orchestrator`` leads (fast recovery gives a killed worker's job back
as soon as its session is gone); three workers drain 3,000 short ``chaos``
jobs, each of which appends ``job attempt pid`` to a file before it returns,
so executions are counted across processes that die at any instruction.
Every ~0.3 s a random worker is killed with SIGKILL and a new one started.

The contract: zero lost (every job ``succeeded``), zero stuck (nothing left
running or queued), each job finished once (one ``succeeded`` event), and
duplicate executions no more than the kills (prefetch 1: a kill interrupts
at most one execution whose outcome was not written).
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import psycopg
from support.orchestrators import spawn as spawn_orchestrator
from support.workers import kill_all, spawn_worker, wait_until

JOBS = 3000
WORKERS = 3
KILL_EVERY_S = 0.3
MAX_KILLS = 25


def statuses(dsn: str) -> Counter[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT status, count(*) FROM queue_engine.jobs GROUP BY 1").fetchall()
    return Counter({str(s): int(n) for s, n in rows})


def test_chaos_sigkill_random_workers_loses_nothing(dsn: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs.log"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, args, max_attempts)"
            " SELECT 'wt', 'chaos', jsonb_build_object('log', %s::text, 'sleep', 0.003), 100"
            " FROM generate_series(1, %s)",
            (str(runs), JOBS),
        )
    env = {"QUEUE_ENGINE_HEARTBEAT_S": "0.5", "QUEUE_ENGINE_POLL_S": "0.1"}
    procs: list[subprocess.Popen[bytes]] = []
    rng = random.Random(4)
    kills = 0
    try:
        procs.append(spawn_orchestrator(dsn, tmp_path / "orchestrator.log"))
        workers = [
            spawn_worker(dsn, log_file=tmp_path / f"worker{i}.log", **env) for i in range(WORKERS)
        ]
        procs.extend(workers)
        started = time.monotonic()
        spawned = WORKERS
        while kills < MAX_KILLS and statuses(dsn)["succeeded"] < JOBS * 0.9:
            time.sleep(KILL_EVERY_S)
            victim = rng.choice(workers)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            kills += 1
            workers.remove(victim)
            fresh = spawn_worker(dsn, log_file=tmp_path / f"worker{spawned}.log", **env)
            spawned += 1
            workers.append(fresh)
            procs.append(fresh)
        killing_s = time.monotonic() - started
        wait_until(
            lambda: statuses(dsn)["succeeded"] == JOBS, timeout=60, interval=0.2, what="all done"
        )
        drained_s = time.monotonic() - started
        assert all(w.poll() is None for w in workers), "a restarted worker died"
    finally:
        kill_all(procs)

    final = statuses(dsn)
    assert final == Counter({"succeeded": JOBS}), f"lost or stuck jobs: {final}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        twice = conn.execute(
            "SELECT count(*) FROM (SELECT job_id FROM queue_engine.job_events"
            " WHERE kind = 'succeeded' GROUP BY job_id HAVING count(*) <> 1) t"
        ).fetchone()
        recovered = conn.execute(
            "SELECT count(*) FROM queue_engine.job_events WHERE kind = 'recovered'"
        ).fetchone()
    executions = Counter(int(line.split()[0]) for line in runs.read_text().splitlines())
    duplicates = sum(n - 1 for n in executions.values())
    print(
        f"\nchaos: {JOBS} jobs, {kills} SIGKILLs over {killing_s:.1f} s, drained in "
        f"{drained_s:.1f} s; executions {sum(executions.values())}, duplicates {duplicates}, "
        f"jobs recovered by the orchestrator {recovered[0] if recovered else 0}"
    )
    assert twice == (0,), "a job finished twice"
    assert len(executions) == JOBS, "a job never ran"
    assert duplicates <= kills, f"{duplicates} duplicate executions for {kills} kills"
    assert kills > 0
