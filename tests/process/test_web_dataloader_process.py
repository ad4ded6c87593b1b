"""The real ``queue-web --compat dataloader``: a dataloader client's requests, and its refusals at start.

The switch as an operator sets it (the option and its variables) reaches the
server: a client with no credentials triggers and polls a job when the
operator opted in on loopback, and anonymous routes on another address stop
the process at start with one line (exit 2) unless explicitly forced.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from support.ctl import BIN
from support.orchestrators import procs, wait_for
from support.ports import free_port
from support.web_process import get

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here

WAIT_S = 30


def env_of(**settings: str) -> dict[str, str]:
    """The test's environment without PG* or engine settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}
    env.update(settings)
    return env


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST ``body`` as JSON without credentials: the status and JSON answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, json.loads(response.read())


def test_an_anonymous_dataloader_client_triggers_and_polls_a_job(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    port = free_port()
    with (tmp_path / "web.log").open("wb") as out:
        procs.append(
            subprocess.Popen(
                [
                    str(BIN / "queue-web"),
                    "--dsn",
                    dsn,
                    "--port",
                    str(port),
                    "--compat",
                    "dataloader",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env_of(QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS="on"),
            )
        )
    wait_for("queue-web to be ready", lambda: get(port, "/ready")[0] == 200, procs)
    assert get(port, "/health") == (200, {"status": "healthy"})
    status, body = post(port, "/api/v1/jobs/trigger", {"queue": "load.cbr", "task": "noop"})
    assert status == 200 and body["status"] == "queued"
    job_id = str(uuid.UUID(body["job_id"]))
    status, polled = get(port, f"/api/v1/jobs/{job_id}/status")
    assert status == 200 and polled["job_id"] == job_id and polled["status"] == "queued"
    assert get(port, "/api/v1/jobs")[0] == 401  # only the dataloader routes are open


def test_anonymous_dataloader_routes_on_another_address_exit_2_unless_forced(
    tmp_path: Path,
) -> None:
    command = [str(BIN / "queue-web"), "--host", "192.0.2.10", "--port", str(free_port())]
    refused = subprocess.run(
        [*command, "--compat", "dataloader"],
        capture_output=True,
        text=True,
        env=env_of(QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS="on"),
        timeout=WAIT_S,
    )
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS_ANY_HOST=on" in refused.stderr
    without_switch = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env_of(QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS="on"),
        timeout=WAIT_S,
    )
    assert without_switch.returncode == 2 and "needs --compat dataloader" in without_switch.stderr
    # Forced: past the check, the bind fails on an address that is not here (69).
    forced = subprocess.run(
        [*command, "--compat", "dataloader"],
        capture_output=True,
        text=True,
        env=env_of(
            QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS="on", QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS_ANY_HOST="on"
        ),
        timeout=WAIT_S,
    )
    assert forced.returncode == 69, forced.stderr
