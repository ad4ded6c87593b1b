"""``queue-web`` as a real process: started on a port, asked for JSON over HTTP.

For the tests of the binary itself (signals, exit codes, logs) and of its HTTP
API from outside (the schemathesis run); the in-process app is ``support.web``.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from support.ctl import BIN

#: The operator token the process is started with (``QUEUE_ENGINE_WEB_TOKENS``).
TOKEN = "operator-token-for-the-process-test"


def spawn(dsn: str, port: int, log: Path, *options: str) -> subprocess.Popen[bytes]:
    """Start ``queue-web`` on ``port`` with JSON logs to ``log``, no PG* or engine settings but TOKEN.

    ``options``: more command-line options (``--compat dataloader``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}
    env["QUEUE_ENGINE_WEB_TOKENS"] = f"operator:{TOKEN}"
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                str(BIN / "queue-web"),
                "--dsn",
                dsn,
                "--port",
                str(port),
                "--log-format",
                "json",
                *options,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def get(port: int, path: str, token: str | None = None) -> tuple[int, dict[str, Any]]:
    """GET ``path`` (with ``token`` as a bearer): the status and JSON body; ``(0, {})`` if down."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, {}
