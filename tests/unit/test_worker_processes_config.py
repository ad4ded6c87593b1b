"""``WorkerProcesses``' configuration, checked before any process starts.

No process is started here: bad arguments are refused with one line, the
``QUEUE_ENGINE_WORKERS_BESIDE`` switch turns the workers off (pqrun's
``WORKER_ENABLED=false``), and the stop timeout follows the workers' grace.
(tests/process/test_worker_processes.py runs real ones.)
"""

from __future__ import annotations

from typing import Any

import pytest

from queue_engine import WorkerProcesses
from queue_engine.foundation.errors import ConfigError, ValidationError
from queue_engine.producer.worker_processes import STOP_MARGIN_S

NEVER_RUN = ["/nonexistent/queue-claim-worker"]


@pytest.mark.parametrize(
    ("workers", "app", "message"),
    [
        ({}, "tasks", "needs at least one queue"),
        ({"bad queue": 1}, "tasks", "invalid queue name"),
        ({"email": -1}, "tasks", "queue 'email' must be an integer between 0 and 64"),
        ({"email": True}, "tasks", "queue 'email' must be an integer between 0 and 64"),
        ({"email": 1.5}, "tasks", "queue 'email' must be an integer between 0 and 64"),
        ({"email": 1}, "", "needs app='module'"),
    ],
)
def test_bad_arguments_are_one_line(workers: Any, app: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        WorkerProcesses(workers, app=app, command=NEVER_RUN)


@pytest.mark.parametrize(("value", "enabled"), [("off", False), ("OFF", False), ("on", True)])
def test_the_setting_turns_the_workers_off(value: str, enabled: bool) -> None:
    workers = WorkerProcesses(
        {"email": 2}, app="tasks", env={"QUEUE_ENGINE_WORKERS_BESIDE": value}, command=NEVER_RUN
    )
    assert workers.enabled is enabled


def test_off_starts_nothing_and_stops_at_once() -> None:
    # The command does not exist: starting it would raise, so nothing was started.
    with WorkerProcesses(
        {"email": 2}, app="tasks", env={"QUEUE_ENGINE_WORKERS_BESIDE": "off"}, command=NEVER_RUN
    ) as workers:
        assert workers.pids == []
    assert workers.stop() == {"worker:email#1": [], "worker:email#2": []}


def test_the_argument_wins_over_the_setting() -> None:
    workers = WorkerProcesses(
        {"email": 1},
        app="tasks",
        enabled=False,
        env={"QUEUE_ENGINE_WORKERS_BESIDE": "on"},
        command=NEVER_RUN,
    )
    assert workers.enabled is False


def test_a_bad_setting_is_one_line_naming_it() -> None:
    with pytest.raises(ConfigError, match="QUEUE_ENGINE_WORKERS_BESIDE='maybe' is not valid"):
        WorkerProcesses({"email": 1}, app="tasks", env={"QUEUE_ENGINE_WORKERS_BESIDE": "maybe"})


def test_the_stop_timeout_is_the_workers_grace_and_a_margin() -> None:
    workers = WorkerProcesses(
        {"email": 1}, app="tasks", env={"QUEUE_ENGINE_SHUTDOWN_GRACE_S": "7"}, command=NEVER_RUN
    )
    assert workers.stop_timeout_s == 7 + STOP_MARGIN_S
    assert WorkerProcesses({"e": 1}, app="t", stop_timeout_s=3).stop_timeout_s == 3


def test_stop_before_start_is_safe() -> None:
    workers = WorkerProcesses({"email": 1}, app="tasks", command=NEVER_RUN)
    assert workers.stop() == {"worker:email#1": []}
    workers.start()  # after a stop: starts nothing
    assert workers.pids == []
