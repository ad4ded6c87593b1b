"""An idle fleet with its polls spaced out still picks up every job (real processes).

Six ``queue-claim-worker`` processes share a safety-poll rate of one poll a
second (``QUEUE_ENGINE_QUEUE_POLL_RATE=1``): once they have counted each
other, each polls about every 6 s instead of every ``QUEUE_ENGINE_POLL_S``.
No NOTIFY announces a delayed job coming due, so one of those spaced polls
must find it; a job enqueued now is announced, so it needs no poll at all;
and a killed worker takes nothing with it (the others keep polling and
listening). Every wait is a bounded poll of the database: no timing is
asserted, only that the jobs ran.
"""

from __future__ import annotations

import signal

import psycopg
from support.workers import kill_all, spawn_worker, statuses, stop_process, wait_until

from queue_engine import Client

Q = "wt"
FLEET = 6
ENV = {"QUEUE_ENGINE_POLL_S": "0.1", "QUEUE_ENGINE_QUEUE_POLL_RATE": "1"}


def _idle(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM queue_engine.workers"
            " WHERE state = 'idle' AND stopped_at IS NULL AND queue = %s",
            (Q,),
        ).fetchone()
    return int(row[0]) if row else 0


def test_spaced_polls_still_find_delayed_jobs_and_notified_ones_need_none(
    dsn: str, client: Client
) -> None:
    procs = [spawn_worker(dsn, **ENV) for _ in range(FLEET)]
    try:
        wait_until(lambda: _idle(dsn) == FLEET, timeout=60, what="the fleet registered idle")
        # Due while every worker waits between spaced polls: found by one of them.
        delayed = [client.enqueue("echo", queue=Q, delay=d).id for d in (0.5, 1.5, 3.0)]
        # Announced by NOTIFY: every idle worker is woken, none waits for a poll.
        now = client.enqueue("echo", queue=Q).id
        wait_until(
            lambda: all(statuses(dsn).get(i) == "succeeded" for i in [*delayed, now]),
            timeout=60,
            what="the delayed and the notified jobs ran",
        )
        # A worker killed while idle: the rest still find what comes due.
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        later = client.enqueue("echo", queue=Q, delay=1.0).id
        wait_until(
            lambda: statuses(dsn).get(later) == "succeeded",
            timeout=60,
            what="a delayed job after a worker was killed",
        )
        for proc in procs[1:]:
            assert stop_process(proc) == 0
    finally:
        kill_all(procs)
