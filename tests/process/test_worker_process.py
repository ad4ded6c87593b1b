"""``queue-claim-worker`` as a real process: lifecycle, signals, exit codes, logs.

Each test starts the console script with ``--app qe_worker_tasks`` (from
``tests/worker_apps``, put on the subprocess's PYTHONPATH), waits for database
state with bounded polls, and kills whatever is left in ``finally``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support.workers import (
    REPO_ROOT,
    WORKER_BIN,
    all_in,
    create_log_table,
    kill_all,
    spawn_worker,
    statuses,
    stop_process,
    wait_until,
    worker_env,
)

from queue_engine import Client

Q = "wt"


def test_lifecycle_runs_jobs_and_stops_cleanly_on_sigterm(dsn: str, client: Client, conn) -> None:
    ids = client.enqueue_many([{"task": "echo", "queue": Q, "args": {"i": i}} for i in range(20)])
    procs = []
    try:
        procs.append(spawn_worker(dsn))
        wait_until(all_in(dsn, {"succeeded"}), what="all jobs succeeded")
        # Jobs enqueued while the worker idles are picked up through NOTIFY (or the poll).
        late = client.enqueue("echo", queue=Q, args={"late": True}).id
        wait_until(lambda: statuses(dsn)[late] == "succeeded", what="late job ran")
        assert stop_process(procs[0]) == 0
    finally:
        kill_all(procs)
    assert len(ids) == 20
    row = conn.execute("SELECT state, stopped_at IS NOT NULL FROM queue_engine.workers").fetchall()
    assert row == [("stopped", True)]


def test_json_logs_have_stable_keys_and_mask_secrets(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    client.enqueue(
        "secretive",
        queue=Q,
        max_attempts=1,
        args={
            "password": "hunter2",
            "api_token": "t0k3n",
            "nested": {"Authorization": "Bearer zz"},
        },
    )
    ok = client.enqueue("echo", queue=Q, args={"x": 1}).id
    log_file = tmp_path / "worker.log"
    procs = []
    try:
        procs.append(spawn_worker(dsn, "--log-format", "json", log_file=log_file))
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="jobs finished")
        assert stop_process(procs[0]) == 0
    finally:
        kill_all(procs)
    text = log_file.read_text()
    for secret in ("hunter2", "t0k3n", "Bearer zz"):
        assert secret not in text
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    by_event = {r["event"]: r for r in records}
    failed = by_event["job.failed"]
    assert {"job_id", "task", "queue", "attempt", "duration_ms", "worker_id"} <= set(failed)
    assert failed["task"] == "secretive" and failed["queue"] == Q
    assert json.loads(failed["args"])["password"] == "***"
    assert by_event["job.succeeded"]["job_id"] == ok
    assert "worker.started" in by_event and "worker.stopped" in by_event


def test_prefetched_unstarted_jobs_go_back_on_sigterm(dsn: str, client: Client, conn) -> None:
    create_log_table(dsn)
    ids = client.enqueue_many(
        [{"task": "record", "queue": Q, "args": {"sleep": 0.3}} for _ in range(8)]
    )
    procs = []
    try:
        procs.append(spawn_worker(dsn, "--prefetch=5"))
        wait_until(
            lambda: conn.execute("SELECT count(*) FROM worker_test_log").fetchone()[0] >= 1,
            what="first job ran",
        )
        assert stop_process(procs[0]) == 0
    finally:
        kill_all(procs)
    current = statuses(dsn)
    assert "running" not in current.values()
    back = [i for i in ids if current[i] == "queued"]
    assert back, "expected prefetched jobs to be given back"
    assert conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE status = 'queued' AND attempt <> 0"
    ).fetchone() == (0,)
    released = conn.execute(
        "SELECT count(*) FROM queue_engine.job_events WHERE kind = 'released'"
    ).fetchone()
    assert released is not None and released[0] >= 1


def test_worker_reconnects_after_its_session_is_killed(dsn: str, client: Client, conn) -> None:
    procs = []
    try:
        procs.append(spawn_worker(dsn))
        first = client.enqueue("echo", queue=Q).id
        wait_until(lambda: statuses(dsn)[first] == "succeeded", what="first job ran")
        conn.execute(
            "SELECT pg_terminate_backend(backend_pid) FROM queue_engine.workers"
            " WHERE state <> 'stopped'"
        )
        second = client.enqueue("echo", queue=Q).id
        wait_until(lambda: statuses(dsn)[second] == "succeeded", what="job after reconnect ran")
        assert procs[0].poll() is None, "the worker must survive a dropped connection"
        assert stop_process(procs[0]) == 0
    finally:
        kill_all(procs)


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(WORKER_BIN), *args], env=worker_env(**env), capture_output=True, text=True, timeout=60
    )


def test_bad_app_module_is_exit_2_with_one_line(dsn: str) -> None:
    result = _run("--queue=wt", "--app", "no_such_module_xyz", "--dsn", dsn)
    assert result.returncode == 2
    assert "no_such_module_xyz" in result.stderr
    assert "Traceback" not in result.stderr


def test_app_with_a_pqrun_shaped_handler_is_exit_2_with_one_line(dsn: str, tmp_path: Path) -> None:
    # pqrun's ``async def handler(ctx)`` would be called with the args in ``ctx``:
    # the worker refuses the app at start, naming the handler and the rewrite.
    (tmp_path / "pqrun_shaped_app.py").write_text(
        "from queue_engine import task\n\n"
        "@task('summarize', queue='wt')\n"
        "async def summarize(ctx):\n"
        "    return {'tokens': 1}\n"
    )
    result = _run(
        "--queue=wt",
        "--app",
        "pqrun_shaped_app",
        "--dsn",
        dsn,
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO_ROOT)]),
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "task 'summarize': handler summarize(ctx) takes only a context" in lines[0]
    assert "write it as summarize(args, ctx)" in lines[0]


def test_missing_queue_is_exit_2() -> None:
    result = _run("--app", "qe_worker_tasks", QUEUE_ENGINE_QUEUE="")
    assert result.returncode == 2
    assert "--queue" in result.stderr


def test_bad_setting_is_exit_2(dsn: str) -> None:
    result = _run(
        "--queue=wt", "--app", "qe_worker_tasks", "--dsn", dsn, QUEUE_ENGINE_LEASE_TTL_S="abc"
    )
    assert result.returncode == 2
    assert "QUEUE_ENGINE_LEASE_TTL_S" in result.stderr


def test_unreachable_database_at_start_is_exit_69(tmp_path: Path) -> None:
    dsn = f"postgresql://nobody@/nodb?host={tmp_path}&port=1"
    result = _run(
        "--queue=wt", "--app", "qe_worker_tasks", "--dsn", dsn, QUEUE_ENGINE_CONNECT_RETRY_S="0"
    )
    assert result.returncode == 69, result.stderr
    assert "Traceback" not in result.stderr
