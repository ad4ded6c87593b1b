"""The dashboard as an operator uses it: a real Chromium, a real ``queue-web``, a real worker.

Nothing here reloads a page to see a change: "live" means the page changed
by itself (a marker set on ``window`` before the change is still there after
it, so the document was never reloaded).
"""

from __future__ import annotations

import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import psycopg
from support.browser import (  # fixtures too: a conftest.py here would shadow tests/conftest.py
    OPERATOR,
    VIEWER,
    WebServer,
    browser_fixture,
    chromium_fixture,
    click,
    login,
    screenshot,
    wait_for,
    web_server_fixture,
    worker_fixture,
)
from support.ports import free_port
from support.workers import wait_until

from queue_engine import Client
from queue_engine.operator.controls import pause_queue, resume_queue

S = "queue_engine"
Q = "wt"
FIXTURES = (browser_fixture, chromium_fixture, web_server_fixture, worker_fixture)


def by_id(driver: Any, element_id: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id)


def text_of(driver: Any, element_id: str) -> str:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    try:
        return str(by_id(driver, element_id).text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def mark_document(driver: Any) -> None:
    driver.execute_script("window.__qeMarker = 'not reloaded';")


def not_reloaded(driver: Any) -> bool:
    return bool(driver.execute_script("return window.__qeMarker === 'not reloaded';"))


def status_of(conn: psycopg.Connection[Any], job_id: int) -> str:
    row = conn.execute(f"SELECT status FROM {S}.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return str(row[0])


def post_forms(driver: Any) -> list[str]:
    """The actions of every POST form on the page, except signing out."""
    from selenium.webdriver.common.by import By

    forms = driver.find_elements(By.CSS_SELECTOR, "form[method=post]")
    actions = [str(f.get_attribute("action")) for f in forms]
    return [a for a in actions if not a.endswith("/logout")]


def test_overview_updates_live_as_jobs_are_enqueued_and_finished(
    web_server: WebServer,
    worker: subprocess.Popen[bytes],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    pause_queue(conn, S, Q)  # hold the jobs so the page can show them queued first
    login(browser, web_server.url, OPERATOR)
    mark_document(browser)
    ids = [client.enqueue("echo", queue=Q, args={"n": i}).id for i in range(7)]
    wait_for(browser, lambda d: text_of(d, "tile-queued") == "7", what="7 queued on the overview")
    screenshot(browser, "overview-queued")
    resume_queue(conn, S, Q)
    wait_until(lambda: all(status_of(conn, i) == "succeeded" for i in ids), what="jobs done")
    wait_for(browser, lambda d: text_of(d, "tile-queued") == "0", what="0 queued on the overview")
    wait_for(browser, lambda d: text_of(d, "tile-out") == "7", what="7 done in the last minute")
    assert not_reloaded(browser)
    screenshot(browser, "overview")


def test_job_timeline_grows_while_it_runs(
    web_server: WebServer,
    worker: subprocess.Popen[bytes],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    from selenium.webdriver.common.by import By

    pause_queue(conn, S, Q)
    job_id = client.enqueue("sleepy", queue=Q, args={"sleep": 2}).id
    login(browser, web_server.url, OPERATOR)
    browser.get(f"{web_server.url}/jobs/{job_id}")
    mark_document(browser)

    def events(d: Any) -> int:
        return len(d.find_elements(By.CSS_SELECTOR, "#timeline li[data-kind]"))

    wait_for(browser, lambda d: text_of(d, "job-status") == "queued", what="the queued job")
    before = events(browser)  # a queued job has no event yet (the first is its claim)
    resume_queue(conn, S, Q)
    wait_for(browser, lambda d: text_of(d, "job-status") == "running", what="running on the page")
    running = events(browser)
    assert running > before
    screenshot(browser, "job-running")
    wait_for(browser, lambda d: text_of(d, "job-status") == "succeeded", what="succeeded")
    assert events(browser) > running
    assert '"slept": 2' in text_of(browser, "job-result")
    assert not_reloaded(browser)
    screenshot(browser, "job")


def test_cancel_from_the_job_page_cancels_the_running_job(
    web_server: WebServer,
    worker: subprocess.Popen[bytes],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    from selenium.webdriver.common.by import By

    job_id = client.enqueue("wait_cancel", queue=Q, args={"max_s": 60}).id
    wait_until(lambda: status_of(conn, job_id) == "running", what="the job running")
    login(browser, web_server.url, OPERATOR)
    browser.get(f"{web_server.url}/jobs/{job_id}")
    click(browser, By.ID, "cancel-job")
    browser.switch_to.alert.accept()
    wait_until(lambda: status_of(conn, job_id) == "canceled", what="the job canceled")
    wait_for(browser, lambda d: text_of(d, "job-status") == "canceled", what="canceled on the page")
    screenshot(browser, "job-canceled")


def test_pause_from_the_queues_page_stops_claims(
    web_server: WebServer,
    worker: subprocess.Popen[bytes],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    from selenium.webdriver.common.by import By

    first = client.enqueue("echo", queue=Q).id
    wait_until(lambda: status_of(conn, first) == "succeeded", what="the worker claiming")
    login(browser, web_server.url, OPERATOR)
    browser.get(f"{web_server.url}/queues")
    wait_for(browser, lambda d: d.find_elements(By.NAME, "pause"), what="the pause button")
    click(browser, By.NAME, "pause")
    wait_for(browser, lambda d: "paused" in text_of(d, "queues-table"), what="paused on the page")
    row = conn.execute(f"SELECT paused FROM {S}.queues WHERE name = %s", (Q,)).fetchone()
    assert row == (True,)
    held = client.enqueue("echo", queue=Q).id
    # The worker polls every 0.1 s and is woken by the enqueue's NOTIFY: after
    # 30 of its polls the job must still be waiting, since the queue is paused.
    wait_until(
        lambda: (
            conn.execute(
                f"SELECT count(*) FROM {S}.job_events WHERE job_id = %s", (held,)
            ).fetchone()
            is not None
        ),
        what="the enqueue event",
    )
    deadline = conn.execute("SELECT clock_timestamp() + interval '3 seconds'").fetchone()
    assert deadline is not None
    wait_until(
        lambda: conn.execute("SELECT clock_timestamp() > %s", deadline).fetchone() == (True,),
        what="three seconds of database time",
    )
    assert status_of(conn, held) == "queued"
    screenshot(browser, "queues")
    click(browser, By.NAME, "resume")
    wait_until(lambda: status_of(conn, held) == "succeeded", what="claims again after resume")


def test_workers_page_shows_the_hosts_cpu_and_memory_and_stop_now_gives_the_job_back(
    web_server: WebServer,
    worker: subprocess.Popen[bytes],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    from selenium.webdriver.common.by import By

    job_id = client.enqueue("wait_cancel", queue=Q, args={"max_s": 60}).id
    wait_until(lambda: status_of(conn, job_id) == "running", what="the job running")
    # The second beat of the worker carries the host's CPU % (the first has no window).
    wait_until(
        lambda: (
            conn.execute(
                f"SELECT telemetry ->> 'cpu_pct' FROM {S}.workers WHERE role = 'worker'"
            ).fetchone()
            not in (None, (None,))
        ),
        what="the host's CPU % in the worker's telemetry",
    )
    login(browser, web_server.url, OPERATOR)
    browser.get(f"{web_server.url}/workers")
    wait_for(browser, lambda d: "G</td>" in d.page_source, what="host memory on the page")
    screenshot(browser, "workers-host-use")
    cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#workers-table td")]
    assert any("%" in c and "/" in c and c.endswith("G") for c in cells), cells
    click(browser, By.XPATH, "//button[text()='Stop now']")
    browser.switch_to.alert.accept()
    assert worker.wait(30) == 0
    assert status_of(conn, job_id) == "queued"
    row = conn.execute(f"SELECT attempt FROM {S}.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == (0,)
    wait_for(browser, lambda d: "gives its running job back" in d.page_source, what="banner")
    screenshot(browser, "workers-stopped-now")


def test_read_only_login_sees_no_controls_and_a_forged_post_is_refused(
    web_server: WebServer,
    worker: subprocess.Popen[bytes],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    from selenium.webdriver.common.by import By

    job_id = client.enqueue("wait_cancel", queue=Q, args={"max_s": 60}).id
    wait_until(lambda: status_of(conn, job_id) == "running", what="the job running")
    login(browser, web_server.url, VIEWER)
    for path in ("/", "/jobs?queue=wt", f"/jobs/{job_id}", "/queues", "/workers", "/schedules"):
        browser.get(web_server.url + path)
        wait_for(browser, lambda d: d.find_elements(By.TAG_NAME, "h1"), what=path)
        assert post_forms(browser) == [], f"{path} shows mutating controls to a read-only login"
        if path == "/workers":
            screenshot(browser, "read-only-workers")
        assert not browser.find_elements(By.TAG_NAME, "button") or all(
            b.get_attribute("id") == "sign-out"
            or b.get_attribute("type") != "submit"
            or b.find_element(By.XPATH, "./ancestor::form").get_attribute("method") == "get"
            for b in browser.find_elements(By.TAG_NAME, "button")
        )
    # The server refuses too: the viewer's own session posting a cancel gets 403.
    status = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {method: 'POST'}).then(r => done(r.status), e => done(String(e)));",
        f"{web_server.url}/actions/jobs/{job_id}/cancel",
    )
    assert status == 403

    # A forged cross-site form: a page on another origin posts to queue-web
    # with the operator's session cookie in the browser.
    login(browser, web_server.url, OPERATOR)
    evil = _serve_forgery(f"{web_server.url}/actions/queues/{Q}/pause")
    try:
        browser.get(evil)
        wait_for(browser, lambda d: "cross-" in d.page_source, what="the refusal")
        assert "403" in browser.page_source or "refused" in browser.page_source
    finally:
        pass
    row = conn.execute(f"SELECT paused FROM {S}.queues WHERE name = %s", (Q,)).fetchone()
    assert row in (None, (False,)), "a forged cross-site post paused the queue"
    assert status_of(conn, job_id) == "running"


def _serve_forgery(target: str) -> str:
    """A page on another origin (``localhost`` vs ``127.0.0.1``) that auto-posts a form to ``target``."""
    page = (
        "<!doctype html><form id=f method=post action='" + target + "'>"
        "<input name=x value=1></form><script>document.getElementById('f').submit()</script>"
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    return f"http://localhost:{port}/"
