"""A real ``queue-web`` process (this venv's console script) for the web benches."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

WEB_BIN = Path(sys.executable).parent / "queue-web"


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def queue_web(dsn: str, env: Mapping[str, str], timeout: float = 60.0) -> Iterator[str]:
    """Yield the base URL of a ``queue-web`` on ``dsn`` once its ``/ready`` answers 200.

    Its environment is this one without libpq's or the engine's variables, plus
    ``env`` (its users or tokens, say). It is stopped with SIGTERM at the end; its
    exit code goes to stderr.
    """
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}
    argv = [str(WEB_BIN), "--dsn", dsn, "--port", str(port), "--log-level", "WARNING"]
    proc = subprocess.Popen(argv, env={**clean, **env})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{base}/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("queue-web did not become ready")
            time.sleep(0.1)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        print(f"queue-web stopped with exit code {code}", file=sys.stderr)
