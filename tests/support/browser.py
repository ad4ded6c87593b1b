"""The dashboard in a real browser: headless Chromium (Debian's) driven by selenium.

The fixtures and helpers of tests/browser (imported by the test modules: a
``conftest.py`` in tests/browser would shadow ``tests/conftest.py`` for the
modules that import it by name).

Every test here runs a real ``queue-web`` process and, where it needs one, a
real ``queue-claim-worker`` on the ``wt`` queue of the test apps, each on the
test's own fresh database. Chromium and its driver come from Debian
(``chromium``, ``chromium-driver``): when they are missing the session tries
``scripts/install-system-packages`` once and otherwise skips every browser
test with the reason. selenium gets the driver's path, so selenium-manager
never tries to download a browser or a driver.

Each test saves screenshots of the pages it visits in
``.artifacts/screenshots/`` (gitignored), to look at after a run, at a
laptop's 1366x768 viewport. The screenshots the docs show come from the same
run: with ``QUEUE_ENGINE_DOCS_IMAGES=1`` a screenshot given a ``docs`` name is
also written to ``docs/images/`` (docs/contributing.md says how to refresh
them).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from queue_engine.foundation import settings
from support.ports import free_port
from support.workers import kill_all, spawn_worker, stop_process, wait_until

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALLER = REPO_ROOT / "scripts" / "install-system-packages"
SCREENSHOTS = REPO_ROOT / ".artifacts" / "screenshots"
WEB_BIN = Path(sys.executable).parent / "queue-web"

OPERATOR = ("admin", "operator-password")
VIEWER = ("viewer", "viewer-password")
USERS = f"{OPERATOR[0]}:operator:{OPERATOR[1]},{VIEWER[0]}:read:{VIEWER[1]}"

DOCS_IMAGES = REPO_ROOT / "docs" / "images"

#: The viewport every page is checked and photographed at: a common laptop screen.
VIEWPORT = (1366, 768)


def _have_browser() -> bool:
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


@pytest.fixture(scope="session", name="chromium")
def chromium_fixture() -> Path:
    """Chromium and its driver, installed from Debian if missing; skip with the reason if impossible."""
    if not _have_browser() and INSTALLER.exists():
        subprocess.run(
            ["bash", str(INSTALLER), "chromium", "chromium-driver"],
            check=False,
            timeout=900,
            stdout=subprocess.DEVNULL,
        )
    if not _have_browser():
        pytest.skip(
            f"no {CHROMIUM} or {CHROMEDRIVER}: install Debian's chromium and chromium-driver "
            f"(scripts/install-system-packages chromium chromium-driver, as root)"
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    return CHROMIUM


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


class WebServer:
    """A running ``queue-web``: its base URL and process."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.proc = proc
        self.url = url
        self.log = log

    def sign_in_link(self) -> str:
        """The first-run link the process printed (nothing configured), once it is there."""
        found = wait_until(
            lambda: SIGN_IN_LINK.search(self.log.read_text()), timeout=30, what="the sign-in link"
        )
        return str(found.group(1))


#: The line ``queue-web`` prints when nothing is configured (first run).
SIGN_IN_LINK = re.compile(r"^Sign in as operator: (http://\S+/login\?token=\S+)$", re.M)


@contextmanager
def running_web(dsn: str, log: Path, env: dict[str, str]) -> Iterator[WebServer]:
    """``queue-web`` on a free loopback port with ``env``, stopped at the end."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(WEB_BIN), "--dsn", dsn, "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(
            lambda: proc.poll() is not None or _healthy(url), timeout=60, what="queue-web /health"
        )
        assert proc.poll() is None, f"queue-web exited: {log.read_text()[-2000:]}"
        yield WebServer(proc, url, log)
    finally:
        stop_process(proc, timeout=15)


@pytest.fixture(name="web_server")
def web_server_fixture(dsn: str, tmp_path: Path) -> Iterator[WebServer]:
    """``queue-web`` on a free loopback port, with an operator and a read-only login."""
    env = dict(os.environ)
    env.update(
        QUEUE_ENGINE_WEB_USERS=USERS,
        QUEUE_ENGINE_WEB_SESSION_SECRET="browser-test-session-secret",
    )
    with running_web(dsn, tmp_path / "queue-web.log", env) as server:
        yield server


@pytest.fixture(name="first_run_server")
def first_run_server_fixture(dsn: str, tmp_path: Path) -> Iterator[WebServer]:
    """``queue-web`` on loopback with nothing configured: it prints a sign-in link."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUE_ENGINE_WEB_")}
    with running_web(dsn, tmp_path / "queue-web.log", env) as server:
        yield server


@pytest.fixture(name="worker")
def worker_fixture(dsn: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One ``queue-claim-worker`` on the ``wt`` queue.

    A short shutdown grace: a test may end with a job still running (a 60 s
    ``wait_cancel``), and the teardown's SIGTERM would otherwise wait the
    default 30 s grace for it (20 s, then SIGKILL) after every such test.
    """
    proc = spawn_worker(dsn, log_file=tmp_path / "worker.log", QUEUE_ENGINE_SHUTDOWN_GRACE_S="1")
    try:
        yield proc
    finally:
        stop_process(proc)
        kill_all([proc])


@pytest.fixture(name="fleet")
def fleet_fixture(dsn: str, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Three ``queue-claim-worker`` processes on ``wt``: what ``support.scene.build_scene`` needs."""
    procs = [
        spawn_worker(dsn, log_file=tmp_path / f"worker-{i}.log", QUEUE_ENGINE_SHUTDOWN_GRACE_S="1")
        for i in range(3)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            stop_process(proc)
        kill_all(procs)


@pytest.fixture(name="browser")
def browser_fixture(chromium: Path, tmp_path: Path) -> Iterator[Any]:
    """A fresh headless Chromium (its own profile folder), closed after the test."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    set_viewport(driver, *VIEWPORT)
    try:
        yield driver
    finally:
        driver.quit()


def login(driver: Any, url: str, who: tuple[str, str]) -> None:
    """Sign in through the login form and land on the overview."""
    from selenium.webdriver.common.by import By

    driver.get(f"{url}/login")
    driver.find_element(By.NAME, "username").send_keys(who[0])
    driver.find_element(By.NAME, "password").send_keys(who[1])
    driver.find_element(By.ID, "sign-in").click()
    wait_for(driver, lambda d: d.find_elements(By.ID, "live-dot"), what="the overview after login")


def wait_for(
    driver: Any, condition: Callable[[Any], Any], *, timeout: float = 30.0, what: str = ""
) -> Any:
    """Poll a condition on the page (no fixed sleeps).

    An element that went stale between finding and reading it (the page was
    replaced by a navigation, or a live fragment swapped it) counts as "not
    yet": the next poll finds the new one.
    """
    from selenium.common.exceptions import StaleElementReferenceException

    def check() -> Any:
        try:
            return condition(driver)
        except StaleElementReferenceException:
            return None

    return wait_until(check, timeout=timeout, interval=0.1, what=what)


def click(driver: Any, by: str, value: str, *, timeout: float = 30.0) -> None:
    """Find an element and click it, again if a live fragment swapped it in between.

    The pages refresh their live parts (htmx polls and server events), so an
    element found a moment ago may be gone when the click arrives: Selenium
    then raises ``StaleElementReferenceException`` *before* clicking, so
    finding it again and clicking once more can never click twice.
    """
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def attempt() -> bool:
        try:
            driver.find_element(by, value).click()
        except (NoSuchElementException, StaleElementReferenceException):
            return False
        return True

    wait_until(attempt, timeout=timeout, interval=0.1, what=f"a click on {value}")


def set_viewport(driver: Any, width: int, height: int) -> None:
    """Size the window so that the page itself (the viewport) is ``width`` x ``height``.

    ``--window-size`` and ``set_window_size`` size the whole window, of which
    Chromium (headless too) keeps some for its own frame: the page would get
    less than the screen the tests mean.
    """
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    driver.set_window_size(2 * width - int(inner[0]), 2 * height - int(inner[1]))
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    assert (int(inner[0]), int(inner[1])) == (width, height), inner


def screenshot(driver: Any, name: str, *, docs: str | None = None, full_page: bool = False) -> Path:
    """Save the viewport as ``.artifacts/screenshots/<name>.png`` (looked at by people).

    ``docs``: the name of the image in docs/images/ this screenshot is, written
    there too when ``QUEUE_ENGINE_DOCS_IMAGES=1``. ``full_page``: also save the
    whole page, below the fold included, as ``<name>-full.png`` (when it is
    taller than the window).
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    taller = driver.execute_script(
        "return document.documentElement.scrollHeight > window.innerHeight;"
    )
    if full_page and taller:
        (SCREENSHOTS / f"{name}-full.png").write_bytes(_whole_page(driver))
    if docs is not None and settings.DOCS_IMAGES.read() == "1":
        shutil.copyfile(path, DOCS_IMAGES / f"{docs}.png")
    return path


def _whole_page(driver: Any) -> bytes:
    """The whole page as a PNG, beyond the viewport (Chromium's DevTools protocol)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        },
    )
    return base64.b64decode(shot["data"])
