"""Postgres failover: the primary crashes, the standby is promoted, the fleet follows by itself.

A real primary and a streaming standby (asynchronous replication, the default;
``tests/process/replication.py``). Every process uses one multi-host DSN with
``target_session_attrs=read-write``: two ``queue-claim-worker`` draining a
backlog, a ``queue-orchestrator`` leading, a ``queue-scheduler`` with an
every-second schedule, and a producer enqueuing one job per transaction. A
third worker is given the standby alone: a read-only server, which it must
refuse (and wait on with backoff) instead of failing statement after
statement; once the standby is promoted it works there.

Part-way through, the producer pauses until the standby has replayed what the
primary flushed (with asynchronous replication a commit acknowledged in the
last moments before a crash may never reach the standby: what the docs say),
then the primary is crashed (``pg_ctl stop -m immediate``) while the workers
keep claiming and finishing with ``synchronous_commit = off``, and the standby
is promoted. The producer resumes at once, through the outage.

Every committed enqueue must finish on the new primary; a claim or a finish
the crash lost makes its job run again, which at-least-once allows: the test
counts those runs (from a file the handler appends to, outside Postgres) and
prints the numbers the docs quote (docs/operations.md, "Failover").
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import support.workers
from support.ctl import ok, queue_ctl
from support.orchestrators import count_in
from support.orchestrators import spawn as spawn_orchestrator
from support.replication import ReplicatedPair, missing_tools
from support.workers import kill_all, stop_process, wait_until

from queue_engine import Client
from queue_engine.foundation.migrate import Migrator

BIN = Path(sys.executable).parent
BACKLOG = 1200
Conn = psycopg.Connection[Any]

pytestmark = pytest.mark.skipif(
    missing_tools() is not None, reason=f"needs a primary and a standby: {missing_tools()}"
)


@pytest.fixture
def pair() -> Iterator[ReplicatedPair]:
    """A primary and its streaming standby, destroyed after the test.

    In a folder of its own rather than pytest's ``tmp_path``: as root the
    servers run as an unprivileged user, who must be able to reach it.
    """
    servers = ReplicatedPair()
    try:
        servers.start()
        yield servers
    finally:
        servers.destroy()


def spawn_worker(
    dsn: str, log: Path, runs: Path, synchronous_commit: str
) -> subprocess.Popen[bytes]:
    """A ``queue-claim-worker`` of the ``fo`` queue running ``failover_app``."""
    return support.workers.spawn_worker(
        dsn,
        queue="fo",
        app="failover_app",
        log_file=log,
        QE_FAILOVER_RUNS=str(runs),
        QUEUE_ENGINE_RECONNECT_MAX_S="1",
        QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT=synchronous_commit,
    )


def spawn_scheduler(dsn: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "QUEUE_ENGINE_HEARTBEAT_S": "0.5",
        "QUEUE_ENGINE_RECONNECT_MAX_S": "1",
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(BIN / "queue-scheduler"), "--dsn", dsn, "--log-level", "DEBUG"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


class Producer:
    """Enqueues one ``mark`` job per transaction until stopped; remembers the committed ids.

    An enqueue that raised is not counted: during the outage that is every
    one, and the producer simply tries again, as an application would.
    """

    def __init__(self, dsn: str) -> None:
        self.client = Client(dsn)
        self.committed: list[int] = []
        self.failures = 0
        self.paused = threading.Event()
        self.idle = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            if self.paused.is_set():
                self.idle.set()
                time.sleep(0.01)
                continue
            self.idle.clear()
            try:
                job = self.client.enqueue("mark", queue="fo", args={"sleep": 0.002})
            except Exception:
                self.failures += 1
                time.sleep(0.05)
                continue
            self.committed.append(job.id)
            time.sleep(0.01)

    def pause(self) -> None:
        self.idle.clear()
        self.paused.set()
        assert self.idle.wait(30), "the producer did not pause"

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)
        self.client.close()


def runs_by_job(runs: Path) -> dict[int, list[int]]:
    """``{job id: [pid of each run]}`` from the handler's file."""
    found: dict[int, list[int]] = collections.defaultdict(list)
    if runs.exists():
        for line in runs.read_text().splitlines():
            job_id, _attempt, pid = line.split()
            found[int(job_id)].append(int(pid))
    return found


def scalar(conn: Conn, query: str, *params: Any) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("synchronous_commit", ["off", "on"])
def test_crash_of_the_primary_and_promotion_of_the_standby(
    pair: ReplicatedPair, tmp_path: Path, synchronous_commit: str
) -> None:
    dsn = pair.multi_host_dsn()
    Migrator(dsn).up()
    ok(queue_ctl("--dsn", dsn, "schedules", "add", "tick", "every 1s", "--task", "tick",
                 "--queue", "sched"))  # fmt: skip
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, args)"
            " SELECT 'fo', 'mark', '{\"sleep\": 0.002}' FROM generate_series(1, %s)",
            (BACKLOG,),
        )
        backlog_ids = [r[0] for r in conn.execute("SELECT id FROM queue_engine.jobs")]
    runs = tmp_path / "runs.txt"
    logs = {name: tmp_path / f"{name}.log" for name in ("w1", "w2", "w_standby", "orch", "sched")}
    standby_only = pair.dsn(pair.standby)  # a read-only server, until it is promoted
    procs = {
        "w1": spawn_worker(dsn, logs["w1"], runs, synchronous_commit),
        "w2": spawn_worker(dsn, logs["w2"], runs, synchronous_commit),
        "w_standby": spawn_worker(standby_only, logs["w_standby"], runs, synchronous_commit),
        "orch": spawn_orchestrator(dsn, logs["orch"]),
        "sched": spawn_scheduler(dsn, logs["sched"]),
    }
    started_at = time.monotonic()
    producer = Producer(dsn)
    try:
        producer.thread.start()
        wait_until(lambda: len(runs_by_job(runs)) >= BACKLOG // 4, timeout=60, what="a quarter run")
        wait_until(lambda: count_in(logs["orch"], "orchestrator.leader_acquired"), what="a leader")
        wait_until(
            lambda: (
                procs["w_standby"].poll() is not None
                or count_in(logs["w_standby"], "worker.db_error") >= 2
            ),
            what="the worker on the standby to refuse it",
        )
        # Before: "internal error: ReadOnlySqlTransaction: cannot execute LISTEN during
        # recovery", exit 70 at once (a crash loop under systemd).
        assert procs["w_standby"].poll() is None, (
            f"the worker given the standby exited {procs['w_standby'].returncode}: "
            + logs["w_standby"].read_text()[-500:]
        )
        assert count_in(logs["w_standby"], "refuses writes") >= 2

        # Enqueues are on the standby; the workers keep claiming and finishing.
        producer.pause()
        pair.wait_replayed()
        committed_before = len(producer.committed)
        errors_before = {w: count_in(logs[w], "worker.db_error") for w in ("w1", "w2")}
        pair.crash_primary()
        crashed_at = time.monotonic()
        producer.paused.clear()
        done_at_crash = len(runs_by_job(runs))
        wait_until(
            lambda: all(count_in(logs[w], "worker.db_error") >= errors_before[w] + 3 for w in errors_before),
            timeout=30,
            what="both workers to retry through the outage three times",
        )  # fmt: skip
        pair.promote()
        promoted_at = time.monotonic()
        with psycopg.connect(pair.dsn(pair.standby), autocommit=True) as conn:
            promoted_db_at = scalar(conn, "SELECT now()")
            # jobs_all: the leader archives a job a minute after it succeeded.
            succeeded = "SELECT count(*) FROM queue_engine.jobs_all WHERE status = 'succeeded'"
            at_promotion = scalar(conn, succeeded)
            wait_until(
                lambda: scalar(conn, succeeded) > at_promotion,
                what="a job finished on the new primary",
            )
            first_finish_s = time.monotonic() - promoted_at

        def all_committed_done() -> bool:
            with psycopg.connect(dsn, autocommit=True) as conn:
                done = {
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM queue_engine.jobs_all WHERE status = 'succeeded'"
                    )
                }
            return len(producer.committed) >= committed_before + 50 and done.issuperset(
                backlog_ids + producer.committed
            )

        wait_until(all_committed_done, timeout=60, interval=0.2, what="every committed job done")
        drained_at = time.monotonic()
        producer.stop()
        wait_until(
            lambda: not psycopg.connect(dsn, autocommit=True)
            .execute("SELECT 1 FROM queue_engine.jobs WHERE queue = 'fo' AND status <> 'succeeded'")
            .fetchone(),
            timeout=60,
            what="the jobs enqueued in doubt done too",
        )  # fmt: skip
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.info.host == str(pair.standby.socket_dir)
            leader_beats = lambda: scalar(  # noqa: E731
                conn,
                "SELECT count(*) FROM queue_engine.workers WHERE role = 'orchestrator'"
                " AND state = 'leader' AND heartbeat_at > %s",
                promoted_db_at,
            )
            wait_until(leader_beats, what="the orchestrator leading on the new primary")
            new_slots = lambda: scalar(  # noqa: E731
                conn,
                "SELECT count(*) FROM queue_engine.jobs WHERE queue = 'sched' AND created_at > %s",
                promoted_db_at,
            )
            wait_until(lambda: new_slots() >= 2, what="the scheduler enqueuing on the new primary")
            total = scalar(conn, "SELECT count(*) FROM queue_engine.jobs WHERE queue = 'fo'")
            max_attempt = scalar(conn, "SELECT max(attempt) FROM queue_engine.jobs WHERE queue = 'fo'")  # fmt: skip
        alive = {name: p.poll() is None for name, p in procs.items()}
        assert all(alive.values()), f"a process died of the failover: {alive}"
        codes = {name: stop_process(p) for name, p in procs.items()}
    finally:
        if not producer.stopping.is_set():
            producer.stop()
        kill_all(list(procs.values()))

    assert codes == dict.fromkeys(procs, 0)
    found = runs_by_job(runs)
    committed = set(backlog_ids) | set(producer.committed)
    assert committed <= set(found), "a committed job never ran"
    twice = {job: pids for job, pids in found.items() if len(pids) > 1}
    assert all(len(pids) == 2 for pids in twice.values()), f"a job ran 3+ times: {twice}"
    standby_pid = procs["w_standby"].pid
    standby_runs = sum(pids.count(standby_pid) for pids in found.values())
    refusals = count_in(logs["w_standby"], "refuses writes")
    released = sum(count_in(logs[w], "worker.orphans_released") for w in ("w1", "w2"))
    reconnects = sum(count_in(logs[w], "worker.reconnected") for w in ("w1", "w2", "w_standby"))
    print(
        f"\nfailover (workers' synchronous_commit={synchronous_commit}): {BACKLOG} backlog + {len(producer.committed)} produced "
        f"({committed_before} before the crash, {producer.failures} enqueue attempts failed "
        f"during the outage), {total} jobs in all; {done_at_crash} had run when the primary "
        f"was crashed; promoted {promoted_at - crashed_at:.1f} s after the crash; first job "
        f"finished on the new primary {first_finish_s:.2f} s after the promotion, every "
        f"committed job {drained_at - promoted_at:.1f} s after it; "
        f"{len(twice)} jobs ran twice (claim or finish lost in the crash; "
        f"highest attempt on the new primary {max_attempt}), {released} orphaned claims "
        f"released, {reconnects} reconnects; the worker given the standby refused it "
        f"{refusals} times, then ran {standby_runs} jobs after the promotion"
    )
    assert standby_runs > 0, "the worker on the standby never worked after the promotion"
    # Refused with backoff, not in a tight loop: a few times a second at most.
    assert refusals < 5 * (promoted_at - started_at) + 5
