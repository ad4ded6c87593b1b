"""Every example's fleet file runs with ``queue-ctl up``; the warm-model fleet end to end.

``queue-ctl up --config examples/<x>/fleet.toml`` is how a user runs a recipe
locally: each file must be valid and its app must import with the file's
``pythonpath``. The warm-model fleet then runs for real, started from another
folder: its two worker processes each load the model once for many jobs and
record every job's progress; a worker killed with SIGKILL is restarted (and
its successor loads the model once again); SIGINT stops everything with exit 0.
The periodic-ETL fleet's scheduler syncs the app's ``@periodic`` schedule
and its workers fetch and load a day.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.up import alive, cleanup, read, start_up, wait, workers

from queue_engine import Client
from queue_engine.cli.up import build_config, read_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLEET_FILES = sorted(EXAMPLES.glob("*/fleet.toml"))


def test_every_example_has_a_fleet_file_a_readme_and_a_test() -> None:
    folders = sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert [p.parent for p in FLEET_FILES] == folders
    tests = (Path(__file__).parent).glob("test_example_*.py")
    tested = " ".join(t.read_text() for t in tests)
    for folder in folders:
        assert (folder / "README.md").is_file(), folder
        assert f'"{folder.name}"' in tested, f"no test loads examples/{folder.name}"


@pytest.mark.parametrize("path", FLEET_FILES, ids=lambda p: p.parent.name)
def test_the_fleet_file_is_valid_and_its_app_imports(path: Path, tmp_path: Path) -> None:
    config = build_config(read_file(path), None, [], str(path), folder=path.parent)
    env = config.environment({k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    done = subprocess.run(
        [sys.executable, "-c", f"import {config.app}"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _two(up: psutil.Process, without: int = 0) -> set[int] | None:
    pids = workers(up)
    return pids if len(pids) == 2 and without not in pids else None


def _infer(client: Client, count: int, model: str) -> list[int]:
    return [
        client.enqueue(
            "model.infer",
            queue="gpu",
            args={"model": model, "input": i / 10, "steps": 3},
            affinity_key=model,
        ).id
        for i in range(count)
    ]


def test_the_warm_model_fleet_runs_restarts_a_killed_worker_and_stops_on_sigint(
    dsn: str, client: Client, tmp_path: Path
) -> None:
    fleet = EXAMPLES / "warm_model" / "fleet.toml"
    proc, up, out = start_up(
        "--config",
        str(fleet),
        "--dsn",
        dsn,
        cwd=tmp_path,  # not the example's folder: the file's pythonpath finds the app
        QUEUE_ENGINE_HEARTBEAT_S="0.5",
        QUEUE_ENGINE_SHUTDOWN_GRACE_S="5",
    )
    seen: set[int] = set()

    def done(ids: list[int]) -> bool:
        return all(client.get(i).status == "succeeded" for i in ids)

    try:
        first = wait("two workers", lambda: _two(up))
        seen |= {c.pid for c in up.children()}
        ids = _infer(client, 8, "tiny-en")
        wait("the inferences", lambda: done(ids))
        jobs = [client.get(i) for i in ids]
        assert {j.result["pid"] for j in jobs} <= first
        assert [j.result["loads"] for j in jobs] == [1] * 8  # once per process, many jobs
        assert all(j.progress == {"step": 3, "of": 3} for j in jobs)

        victim = max(first, key=lambda pid: sum(j.result["pid"] == pid for j in jobs))
        os.kill(victim, signal.SIGKILL)
        replaced = wait("a restarted worker", lambda: _two(up, without=victim))
        seen |= {c.pid for c in up.children()}
        assert len(replaced - first) == 1
        assert "crashed: killed by SIGKILL, restarting in" in read(out)

        more = _infer(client, 6, "tiny-de")  # a model no process has loaded yet
        wait("more inferences", lambda: done(more))
        later = [client.get(i) for i in more]
        assert {j.result["pid"] for j in later} <= replaced
        assert [j.result["loads"] for j in later] == [1] * 6

        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
        text = read(out)
        assert code == 0, text
        assert "all children stopped" in text
        assert alive(seen) == [], text
    finally:
        cleanup(proc, up, out)


def test_the_periodic_etl_fleet_syncs_its_schedule_and_loads_a_day(
    dsn: str, client: Client, conn: Any, tmp_path: Path
) -> None:
    """The fleet's scheduler imports the app through the file's pythonpath and syncs @periodic."""
    proc, up, out = start_up(
        "--config", str(EXAMPLES / "periodic_etl" / "fleet.toml"), "--dsn", dsn, cwd=tmp_path
    )
    try:
        wait(
            "the schedule to be synced",
            lambda: conn.execute(
                "SELECT app FROM queue_engine.schedules WHERE name = 'cbr-daily'"
            ).fetchone(),
        )
        fetch = client.enqueue("cbr.fetch", queue="load.cbr", args={"date": "2026-11-20"})
        wait("the fetch", lambda: client.get(fetch.id).status == "succeeded")
        load_id = client.get(fetch.id).result["load_job"]
        wait("the load", lambda: client.get(load_id).status == "succeeded")
        rows = conn.execute("SELECT count(*) FROM cbr_rates WHERE day = '2026-11-20'").fetchone()
        assert rows == (3,)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, read(out)
    finally:
        cleanup(proc, up, out)
