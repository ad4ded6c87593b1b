"""``queue-web`` stops on SIGTERM while a dashboard's event stream is open.

uvicorn's graceful stop waits for every open response, and a Server-Sent
Events stream never ends by itself: before the fix one open dashboard held a
SIGTERM until the stream's own limit (minutes). Now the first signal ends the
streams, and the process exits 0 at once.
"""

from __future__ import annotations

import base64
import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.ports import free_port
from support.workers import wait_until

WEB_BIN = Path(sys.executable).parent / "queue-web"


def healthy(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except OSError:
        return False


def test_sigterm_ends_open_event_streams_and_exits_0(dsn: str, tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, QUEUE_ENGINE_WEB_USERS="ada:read:ada-password-42")
    with open(tmp_path / "web.log", "wb") as log:
        proc = subprocess.Popen(
            [str(WEB_BIN), "--dsn", dsn, "--port", str(port)], env=env, stdout=log, stderr=log
        )
    try:
        wait_until(lambda: healthy(port), timeout=60, what="queue-web /health")
        stream = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        auth = base64.b64encode(b"ada:ada-password-42").decode()
        stream.request("GET", "/events", headers={"Authorization": f"Basic {auth}"})
        response = stream.getresponse()
        assert response.status == 200
        assert response.getheader("content-type", "").startswith("text/event-stream")
        first = response.readline() + response.readline()
        assert b"retry:" in first
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = proc.wait(timeout=20)
        assert code == 0, (tmp_path / "web.log").read_text()[-2000:]
        # The stream ended cleanly instead of being cut by a kill.
        rest = response.read()
        assert b"event: fleet" in first + rest
        assert time.monotonic() - started < 20
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
