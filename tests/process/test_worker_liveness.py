"""The worker's liveness guarantees with real processes and a real Postgres.

Each test starts ``queue-claim-worker --app qe_worker_tasks`` and pushes one
job into a bad place: past its wall-clock budget (exit 75), stalled (76),
ignoring a cancel (77), taken away while it runs (a zombie), or caught by
SIGTERM (finish, or give back after the grace; a second signal exits at once).
Waits are bounded polls; measured times are printed (run with ``-s``) and
only checked against generous bounds, never tight ones.
"""

from __future__ import annotations

import itertools
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.workers import kill_all, spawn_worker, wait_until

from queue_engine import Client

Q = "wt"
#: A generous bound on any single wait for a process (slow CI machines).
EXIT_WAIT_S = 30.0


def job_row(dsn: str, job_id: int) -> dict[str, Any]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute("SELECT * FROM queue_engine.jobs WHERE id = %s", (job_id,))
        names = [d.name for d in cur.description or []]
        row = cur.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


def events(dsn: str, job_id: int) -> list[tuple[str, int, str | None]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT kind, attempt, message FROM queue_engine.job_events WHERE job_id = %s"
            " ORDER BY id",
            (job_id,),
        ).fetchall()
    return [(str(k), int(a), m) for k, a, m in rows]


def wait_running(dsn: str, job_id: int) -> float:
    """Wait until the job runs; return the monotonic time it was first seen running."""
    wait_until(lambda: job_row(dsn, job_id)["status"] == "running", what=f"job {job_id} running")
    return time.monotonic()


def wait_exit(proc: subprocess.Popen[bytes], since: float, what: str) -> tuple[int, float]:
    """Wait (generously) for the process to exit; return its code and the seconds since ``since``."""
    code = proc.wait(EXIT_WAIT_S)
    elapsed = time.monotonic() - since
    print(f"\n{what}: exit {code} after {elapsed:.2f} s")
    return code, elapsed


@pytest.mark.serial  # a bound on the exit time: no test process beside it
def test_a_job_sleeping_past_its_budget_exits_75_and_is_retried(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    job_id = client.enqueue("sleepy", queue=Q, args={"sleep": 60}, timeout_s=2, max_attempts=2).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]
    try:
        started = wait_running(dsn, job_id)
        code, elapsed = wait_exit(procs[0], started, "watchdog (sleep past a 2 s budget)")
    finally:
        kill_all(procs)
    assert code == 75, log.read_text()
    assert elapsed < 2 + 2 + 5, "exit 75 expected within the budget + 2 s (plus slack)"
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempt"]) == ("queued", 1)  # retried: attempts are left
    assert row["error"] == "watchdog: exceeded 2s budget"
    kinds = [k for k, _, _ in events(dsn, job_id)]
    assert kinds == ["claimed", "retry_scheduled"]
    assert "watchdog.timeout" in log.read_text()


def test_a_busy_python_loop_past_its_budget_exits_75_and_fails(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    job_id = client.enqueue("busy", queue=Q, args={"seconds": 60}, timeout_s=1, max_attempts=1).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]
    try:
        started = wait_running(dsn, job_id)
        code, _ = wait_exit(procs[0], started, "watchdog (busy loop past a 1 s budget)")
    finally:
        kill_all(procs)
    assert code == 75, log.read_text()
    row = job_row(dsn, job_id)
    assert (row["status"], row["error"]) == ("failed", "watchdog: exceeded 1s budget")


def test_a_stalled_generator_exits_76(dsn: str, client: Client, tmp_path: Path) -> None:
    job_id = client.enqueue("stall_gen", queue=Q, args={"sleep": 60}, max_attempts=1).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]
    try:
        started = wait_running(dsn, job_id)
        code, _ = wait_exit(procs[0], started, "stall watchdog (stall_timeout_s=1)")
    finally:
        kill_all(procs)
    assert code == 76, log.read_text()
    row = job_row(dsn, job_id)
    assert row["status"] == "failed"
    assert row["error"].startswith("watchdog: stalled, no progress beat for 1s")
    assert row["progress"] == {"step": 1}


def test_cancel_of_a_running_cooperative_job_ends_canceled(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    job_id = client.enqueue("wait_cancel", queue=Q, args={"max_s": 60}).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]
    try:
        wait_running(dsn, job_id)
        asked = time.monotonic()
        client.cancel(job_id)
        wait_until(lambda: job_row(dsn, job_id)["status"] == "canceled", what="canceled")
        print(f"\ncooperative cancel: canceled {time.monotonic() - asked:.2f} s after the request")
        assert procs[0].poll() is None, "a cooperative cancel must not stop the worker"
        ok = client.enqueue("echo", queue=Q).id
        wait_until(lambda: job_row(dsn, ok)["status"] == "succeeded", what="next job")
    finally:
        kill_all(procs)


def test_a_job_ignoring_its_cancel_is_hard_stopped_and_canceled(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    job_id = client.enqueue("ignore_cancel", queue=Q, args={"sleep": 60}).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log, QUEUE_ENGINE_CANCEL_GRACE_S="1")]
    try:
        wait_running(dsn, job_id)
        asked = time.monotonic()
        client.cancel(job_id)
        code, _ = wait_exit(procs[0], asked, "hard stop (cancel ignored, grace 1 s)")
    finally:
        kill_all(procs)
    assert code == 77, log.read_text()
    row = job_row(dsn, job_id)
    assert row["status"] == "canceled"
    assert "ignored the cancel" in row["error"]
    assert "watchdog.cancel" in log.read_text()


def test_sigterm_during_a_short_job_lets_it_finish_and_exits_0(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    marker = tmp_path / "handler-started"
    job_id = client.enqueue("sleepy", queue=Q, args={"sleep": 1.5, "started_file": str(marker)}).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]
    try:
        # The handler itself must be running: a signal between claim and start
        # rightly gives the (unstarted) job back instead.
        wait_until(marker.exists, what="the handler to start")
        started = time.monotonic()
        procs[0].send_signal(signal.SIGTERM)
        code, _ = wait_exit(procs[0], started, "SIGTERM during a 1.5 s job")
    finally:
        kill_all(procs)
    assert code == 0, log.read_text()
    assert job_row(dsn, job_id)["status"] == "succeeded"


def test_sigterm_during_a_long_job_gives_it_back_uncounted_and_exits_0(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    job_id = client.enqueue("sleepy", queue=Q, args={"sleep": 60}).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log, QUEUE_ENGINE_SHUTDOWN_GRACE_S="1")]
    try:
        wait_running(dsn, job_id)
        sent = time.monotonic()
        procs[0].send_signal(signal.SIGTERM)
        code, _ = wait_exit(procs[0], sent, "SIGTERM during a 60 s job (grace 1 s)")
    finally:
        kill_all(procs)
    assert code == 0, log.read_text()
    row = job_row(dsn, job_id)
    assert (row["status"], row["attempt"], row["error"]) == ("queued", 0, None)
    assert [k for k, _, _ in events(dsn, job_id)] == ["claimed", "given_back"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        state = conn.execute("SELECT state FROM queue_engine.workers").fetchone()
    assert state == ("stopped",)


@pytest.mark.serial  # a bound on the exit time: no test process beside it
def test_a_second_sigterm_exits_at_once(dsn: str, client: Client, tmp_path: Path) -> None:
    job_id = client.enqueue("sleepy", queue=Q, args={"sleep": 60}).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]  # default grace: 30 s
    try:
        wait_running(dsn, job_id)
        procs[0].send_signal(signal.SIGTERM)
        wait_until(lambda: "worker.stopping" in log.read_text(), what="first SIGTERM handled")
        assert procs[0].poll() is None  # still waiting for the job
        sent = time.monotonic()
        procs[0].send_signal(signal.SIGTERM)
        code, elapsed = wait_exit(procs[0], sent, "second SIGTERM")
    finally:
        kill_all(procs)
    assert code == 130, log.read_text()
    assert elapsed < 10, "the second signal must not wait for the 30 s grace"
    assert job_row(dsn, job_id)["status"] == "running"  # left to fast recovery / the lease


def test_a_zombie_generator_is_stopped_and_its_outcome_never_written(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    job_id = client.enqueue("zombie_gen", queue=Q, args={"max_s": 60}).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]
    try:
        wait_running(dsn, job_id)
        with psycopg.connect(dsn, autocommit=True) as conn:  # "reaped" behind its back
            conn.execute(
                "UPDATE queue_engine.jobs SET status = 'queued', claimed_by = NULL,"
                " lease_expires_at = NULL WHERE id = %s",
                (job_id,),
            )
        taken = time.monotonic()
        wait_until(lambda: job_row(dsn, job_id)["status"] == "succeeded", what="attempt 2")
        print(f"\nzombie (cooperative): next attempt done {time.monotonic() - taken:.2f} s later")
        assert procs[0].poll() is None, "a zombie stopped at a checkpoint keeps the worker"
    finally:
        kill_all(procs)
    row = job_row(dsn, job_id)
    assert (row["attempt"], row["result"]) == (2, "attempt 2")
    attempt1 = [k for k, a, _ in events(dsn, job_id) if a == 1]
    assert attempt1 == ["claimed"], "no outcome may be written for the zombie attempt"
    text = log.read_text()
    assert "job.lease_lost" in text and "job.zombie_stopped" in text
    assert "job.finish_ignored" not in text  # not even attempted


def test_a_zombie_that_ignores_checkpoints_is_hard_stopped_77(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    job_id = client.enqueue("zombie_sleep", queue=Q, args={"sleep": 60}).id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log, QUEUE_ENGINE_ZOMBIE_GRACE_S="1")]
    try:
        wait_running(dsn, job_id)
        with psycopg.connect(dsn, autocommit=True) as conn:  # another attempt owns it now
            conn.execute(
                "UPDATE queue_engine.jobs SET claimed_by = 'another:1:worker' WHERE id = %s",
                (job_id,),
            )
        taken = time.monotonic()
        code, _ = wait_exit(procs[0], taken, "zombie hard stop (grace 1 s)")
    finally:
        kill_all(procs)
    assert code == 77, log.read_text()
    row = job_row(dsn, job_id)
    assert (row["status"], row["claimed_by"], row["result"]) == (
        "running",
        "another:1:worker",
        None,
    )
    assert [k for k, _, _ in events(dsn, job_id)] == ["claimed"]
    assert "watchdog.zombie" in log.read_text()


class NotifyListener:
    """Plays systemd: a bound datagram socket read by a thread, each line with its arrival time."""

    def __init__(self) -> None:
        # A short folder: AF_UNIX paths are limited to ~107 bytes, tmp_path can be longer.
        self.folder = Path(tempfile.mkdtemp(prefix="qe-sd-"))
        self.path = self.folder / "notify"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.1)
        self.received: list[tuple[float, str]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._done.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            now = time.monotonic()
            self.received.extend((now, line) for line in data.decode().splitlines())

    def lines(self) -> list[str]:
        return [line for _, line in list(self.received)]

    def close(self) -> None:
        self._done.set()
        self._thread.join(5)
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def test_systemd_ready_status_watchdog_and_stopping(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    listener = NotifyListener()
    log = tmp_path / "worker.log"
    procs = [
        spawn_worker(
            dsn,
            log_file=log,
            NOTIFY_SOCKET=str(listener.path),
            WATCHDOG_USEC="1000000",  # WatchdogSec=1: a ping every 0.25 s
        )
    ]
    try:
        wait_until(lambda: "READY=1" in listener.lines(), what="READY=1")
        wait_until(
            lambda: any(x.startswith("STATUS=idle on queue wt") for x in listener.lines()),
            what="STATUS=idle",
        )
        job_id = client.enqueue("sleepy", queue=Q, args={"sleep": 1}).id
        wait_until(
            lambda: any(x.startswith(f"STATUS=running job {job_id}") for x in listener.lines()),
            what="STATUS=running job N",
        )
        wait_until(lambda: job_row(dsn, job_id)["status"] == "succeeded", what="job done")
        # A hang that freezes every thread (a C call holding the GIL) stops the pings,
        # so systemd would kill the process; they resume when it thaws.
        frozen = client.enqueue("gil_hang", queue=Q, args={"sleep": 3}).id
        wait_until(lambda: job_row(dsn, frozen)["status"] == "succeeded", what="thawed")
        pings_before = listener.lines().count("WATCHDOG=1")
        wait_until(lambda: listener.lines().count("WATCHDOG=1") > pings_before, what="pings resume")
        procs[0].send_signal(signal.SIGTERM)
        assert procs[0].wait(EXIT_WAIT_S) == 0
        wait_until(lambda: "STOPPING=1" in listener.lines(), what="STOPPING=1")
    finally:
        kill_all(procs)
        listener.close()
    pings = [t for t, line in listener.received if line == "WATCHDOG=1"]
    gaps = [b - a for a, b in itertools.pairwise(pings)]
    print(
        f"\nsystemd: {len(pings)} WATCHDOG=1 pings, longest gap {max(gaps):.2f} s (GIL freeze 3 s)"
    )
    assert len(pings) >= 5
    assert max(gaps) >= 2.0, "pings must stop while every thread is frozen"


def _worker_backend(dsn: str) -> tuple[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT id, backend_pid FROM queue_engine.workers WHERE stopped_at IS NULL"
        ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def test_after_a_reconnect_the_lock_key_lock_is_taken_again_and_orphans_given_back(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    keyed = client.enqueue("sleepy", queue=Q, args={"sleep": 3}, lock_key="k1").id
    log = tmp_path / "worker.log"
    procs = [spawn_worker(dsn, log_file=log)]
    try:
        wait_running(dsn, keyed)
        worker_id, old_backend = _worker_backend(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            # A claim whose reply was lost: the job runs under the worker's id, unknown to it.
            orphan = conn.execute(
                "INSERT INTO queue_engine.jobs (queue, task, status, attempt, claimed_by,"
                " started_at) VALUES ('wt', 'echo', 'queued', 0, NULL, NULL) RETURNING id"
            ).fetchone()
            assert orphan is not None
            conn.execute(
                "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = %s"
                " WHERE id = %s",
                (worker_id, orphan[0]),
            )
            conn.execute("SELECT pg_terminate_backend(%s)", (old_backend,))
        new_backend = wait_until(
            lambda: (b := _worker_backend(dsn)[1]) != old_backend and b,
            what="the worker reconnected",
        )

        def advisory_locks() -> int:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND pid = %s",
                    (new_backend,),
                ).fetchone()
            return int(row[0]) if row else 0

        assert wait_until(advisory_locks, what="the lock key's advisory lock taken again") == 1
        wait_until(lambda: job_row(dsn, keyed)["status"] == "succeeded", what="keyed job done")
        wait_until(lambda: job_row(dsn, orphan[0])["status"] == "succeeded", what="orphan ran")
        assert procs[0].poll() is None
    finally:
        kill_all(procs)
    assert job_row(dsn, orphan[0])["attempt"] == 1  # refunded, then claimed again
    assert [k for k, _, _ in events(dsn, orphan[0])] == ["released", "claimed", "succeeded"]
    assert "worker.orphans_released" in log.read_text()
