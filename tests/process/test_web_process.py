"""The real ``queue-web`` binary: it serves /health and /ready, and a SIGTERM stops it with exit 0.

A second SIGTERM while the stop waits for a request in flight exits 130. Also:
a port already taken exits 69, a malformed token list exits 2 without
echoing it, and the JSON log carries the web.* events and never a secret.
With nothing configured it prints a sign-in link on loopback (followed here
with a real HTTP client, cookies and redirects) and refuses any other
address with exit 2. Waits are bounded polls; nothing is timed.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo
from support.orchestrators import BIN, WAIT_S, procs, wait_for
from support.ports import free_port
from support.web_process import TOKEN, get, spawn

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here


def events(log: Path) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        try:
            out.append(json.loads(line)["event"])
        except (ValueError, KeyError):
            continue
    return out


def test_serves_health_and_ready_then_sigterm_exits_0(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    port = free_port()
    log = tmp_path / "web.log"
    secret_dsn = make_conninfo(dsn, password="pw-must-not-leak-42")
    proc = spawn(secret_dsn, port, log)
    procs.append(proc)
    wait_for("queue-web to answer /health", lambda: get(port, "/health")[0] == 200, procs)
    assert get(port, "/health") == (200, {"status": "ok"})
    status, ready = get(port, "/ready")
    assert status == 200 and ready["status"] == "ok", ready
    assert get(port, "/health?db=1")[1]["database"] == "ok"
    status, jobs = get(port, "/api/v1/jobs", TOKEN)
    assert status == 200 and jobs["items"] == []
    assert get(port, "/api/v1/jobs")[0] == 401
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=WAIT_S) == 0
    seen = events(log)
    assert "web.started" in seen and "web.stopping" in seen and "web.stopped" in seen
    text = log.read_text()
    assert "pw-must-not-leak-42" not in text and TOKEN not in text
    assert "web.sign_in_link" not in seen and "token=" not in text  # configured: no link


def test_port_in_use_exits_69(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = spawn(dsn, port, tmp_path / "web.log")
        procs.append(proc)
        assert proc.wait(timeout=WAIT_S) == 69
    assert "could not listen" in (tmp_path / "web.log").read_text()


def test_bad_token_list_exits_2_without_echoing_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}
    env["QUEUE_ENGINE_WEB_TOKENS"] = "admin:secret-token-value-123456"
    result = subprocess.run(
        [str(BIN / "queue-web"), "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT_S,
    )
    assert result.returncode == 2
    assert "QUEUE_ENGINE_WEB_TOKENS" in result.stderr and "unknown scope 'admin'" in result.stderr
    assert "secret-token-value" not in result.stderr


UNIT = Path(__file__).resolve().parents[2] / "systemd" / "queue-web.service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text().replace("/opt/queue-engine/venv/bin/", f"{BIN}/"))
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "" and proc.stdout.strip() == "", proc.stderr + proc.stdout
    text = UNIT.read_text()
    assert "RestartPreventExitStatus=2" in text and "KillSignal=SIGTERM" in text


def test_a_second_sigterm_during_a_stop_waiting_for_a_request_exits_130(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """A request in flight holds the graceful stop; the second SIGTERM ends it at once."""
    import threading

    import psycopg

    from queue_engine import Client

    with Client(dsn) as client:
        job_id = client.enqueue("t").id
    port = free_port()
    log = tmp_path / "web.log"
    proc = spawn(dsn, port, log)
    procs.append(proc)
    wait_for("queue-web to answer /health", lambda: get(port, "/health")[0] == 200, procs)
    with psycopg.connect(dsn) as locker, psycopg.connect(dsn, autocommit=True) as watch:
        locker.execute("SELECT 1 FROM queue_engine.jobs WHERE id = %s FOR UPDATE", (job_id,))

        def cancel() -> None:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/v1/jobs/{job_id}/cancel", method="POST"
            )
            request.add_header("Authorization", f"Bearer {TOKEN}")
            with contextlib.suppress(OSError):  # the process is ended under it
                urllib.request.urlopen(request, timeout=WAIT_S).read()

        thread = threading.Thread(target=cancel, daemon=True)
        thread.start()

        def blocked() -> bool:
            row = watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queue-engine-web' "
                "AND wait_event_type = 'Lock'"
            ).fetchone()
            return row is not None and row[0] > 0

        wait_for("the cancel to wait for the row lock", blocked, procs)
        proc.send_signal(signal.SIGTERM)
        wait_for("web.stopping", lambda: "web.stopping" in events(log), procs)
        assert proc.poll() is None, "the stop should still wait for the request in flight"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT_S) == 130
        locker.rollback()
    assert "web.exit_now" in events(log) and "web.stopped" not in events(log)


# -- the first run: nothing configured ----------------------------------------------------------

#: The line ``queue-web`` prints on stdout when nothing is configured.
LINK = re.compile(r"^Sign in as operator: (http://127\.0\.0\.1:(\d+)/login\?token=([\w-]+))$", re.M)
#: What Chromium sends when it navigates.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def unconfigured_env() -> dict[str, str]:
    """The environment without any ``QUEUE_ENGINE_*`` (no token, no login) or libpq variable."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}


def first_run(dsn: str, out: Path, err: Path) -> subprocess.Popen[bytes]:
    """``queue-web`` with nothing configured on 127.0.0.1, port chosen by the system (the link says)."""
    with out.open("wb") as stdout, err.open("wb") as stderr:
        return subprocess.Popen(
            [str(BIN / "queue-web"), "--dsn", dsn, "--port", "0"],
            stdout=stdout,
            stderr=stderr,
            env=unconfigured_env(),
        )


def browser_get(
    opener: urllib.request.OpenerDirector, url: str
) -> tuple[int, str, str, dict[str, str]]:
    """GET as a browser navigates (redirects followed, cookies kept): status, final URL, body, headers."""
    request = urllib.request.Request(url, headers={"Accept": BROWSER_ACCEPT})
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.url, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.url, exc.read().decode(), dict(exc.headers)


def post_json(opener: urllib.request.OpenerDirector, url: str) -> int:
    """POST as a script does (no Origin, no Sec-Fetch-Site): the status."""
    request = urllib.request.Request(url, method="POST", headers={"Accept": "application/json"})
    try:
        with opener.open(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_first_run_prints_a_sign_in_link_that_signs_a_browser_in_as_operator(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    import psycopg

    out, err = tmp_path / "web.out", tmp_path / "web.err"
    proc = first_run(dsn, out, err)
    procs.append(proc)
    found = wait_for("the sign-in link on stdout", lambda: LINK.search(out.read_text()), procs)
    link, port, token = found.group(1), int(found.group(2)), found.group(3)
    base = f"http://127.0.0.1:{port}"

    # Without the link: a browser gets the sign-in page, an API client problem+json.
    stranger = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    status, url, page, headers = browser_get(stranger, f"{base}/api/v1/jobs")
    assert (status, url) == (200, f"{base}/login?next=/api/v1/jobs")
    assert headers["content-type"].startswith("text/html") and "printed a" in page
    assert get(port, "/api/v1/jobs")[0] == 401
    status, _, page, _ = browser_get(stranger, f"{base}/login?token=not-the-token")
    assert status == 401 and "This sign-in link is not valid" in page

    # The link: the browser lands on the overview, signed in, the token gone from the URL.
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    status, url, page, _ = browser_get(browser, link)
    assert (status, url) == (200, f"{base}/")
    assert "sign-in link · operator" in page and token not in page
    assert [c.name for c in jar] == ["qe_session"] and token not in str(list(jar))
    # An operator action with that session alone.
    assert post_json(browser, f"{base}/api/v1/queues/first-run/pause") == 200
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT paused FROM queue_engine.queues WHERE name = 'first-run'")
        assert row.fetchone() == (True,)

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=WAIT_S) == 0
    stdout, stderr = out.read_text(), err.read_text()
    assert stdout.count(token) == 1 and token not in stderr
    warnings = [line for line in stderr.splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and "web.sign_in_link" in warnings[0], warnings

    # The next process has another link: the old session and the old link are dead.
    again = first_run(dsn, tmp_path / "again.out", tmp_path / "again.err")
    procs.append(again)
    found = wait_for(
        "the second link", lambda: LINK.search((tmp_path / "again.out").read_text()), [again]
    )
    assert found.group(3) != token
    base = f"http://127.0.0.1:{found.group(2)}"
    assert post_json(browser, f"{base}/api/v1/queues/first-run/resume") == 401
    status, _, page, _ = browser_get(browser, f"{base}/login?token={token}")
    assert status == 401 and "This sign-in link is not valid" in page
    again.send_signal(signal.SIGTERM)
    assert again.wait(timeout=WAIT_S) == 0


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10"])
def test_nothing_configured_on_another_address_exits_2_with_one_line(
    host: str, tmp_path: Path
) -> None:
    """192.0.2.10 (TEST-NET) is no address here: the refusal comes before any bind (not 69)."""
    result = subprocess.run(
        [str(BIN / "queue-web"), "--host", host, "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=unconfigured_env(),
        timeout=WAIT_S,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"queue-web: error: no login or token configured, and {host}")
    assert "QUEUE_ENGINE_WEB_USERS" in result.stderr and "QUEUE_ENGINE_WEB_TOKENS" in result.stderr
