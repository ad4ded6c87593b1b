"""Every page of the dashboard at a laptop's 1366x768, with the data of a real day.

The scene (``support.scene.build_scene``) is built through the real paths: three
real workers, real failures with long errors, schedules, delayed jobs, a
workflow with a fan-out, a fan-in and an input node, running jobs with
progress. The tour opens every page, checks that nothing is cut off at this
size (no page and no table scrolls sideways, every control can be clicked),
and saves a screenshot of each in ``.artifacts/screenshots/tour-*.png`` to be
looked at; with ``QUEUE_ENGINE_DOCS_IMAGES=1`` it also refreshes the images of
the docs.
"""

from __future__ import annotations

import re
import subprocess
import urllib.request
from typing import Any

import psycopg
from support.browser import (  # fixtures too: a conftest.py here would shadow tests/conftest.py
    OPERATOR,
    WebServer,
    browser_fixture,
    chromium_fixture,
    click,
    fleet_fixture,
    login,
    screenshot,
    wait_for,
    web_server_fixture,
)
from support.scene import Scene, build_scene, past_hour_fixture

from queue_engine import Client

FIXTURES = (browser_fixture, chromium_fixture, fleet_fixture, past_hour_fixture, web_server_fixture)

#: How wide the page and each of its tables draw, against the room they have.
WIDTHS = """
return {
  page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
  tables: Array.from(document.querySelectorAll('.table-wrap, pre.error, .dag-graph')).map(
    e => [e.id || e.className, e.scrollWidth, e.clientWidth]),
};
"""


def cut_off(driver: Any, path: str) -> list[str]:
    """What scrolls sideways on the page: the page itself, a table, an error pane, the graph."""
    widths = driver.execute_script(WIDTHS)
    wide, room = widths["page"]
    found = [f"{path}: the page is {wide}px wide in a {room}px window"] if wide > room else []
    found += [
        f"{path}: {name} needs {wide}px and has {room}px: cut off"
        for name, wide, room in widths["tables"]
        if wide > room
    ]
    return found


def rect(driver: Any, element: Any) -> dict[str, float]:
    return dict(
        driver.execute_script("return arguments[0].getBoundingClientRect().toJSON();", element)
    )


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["left"] >= outer["left"] - 0.5
        and inner["right"] <= outer["right"] + 0.5
        and inner["width"] > 0
        and inner["height"] > 0
    )


def fleet_figures(driver: Any) -> tuple[str, str]:
    """Running jobs and live workers as the top bar shows them."""
    from selenium.webdriver.common.by import By

    return tuple(  # type: ignore[return-value]
        str(driver.find_element(By.CSS_SELECTOR, f'[data-fleet="{name}"]').text)
        for name in ("running", "workers_live")
    )


def open_page(driver: Any, url: str, path: str, element_id: str, *, timeout: float = 30.0) -> None:
    """Open a page and wait for one element it draws (AssertionError when it never comes)."""
    from selenium.webdriver.common.by import By

    driver.get(url + path)
    wait_for(
        driver,
        lambda d: d.find_elements(By.ID, element_id),
        timeout=timeout,
        what=f"#{element_id} on {path}",
    )


def test_every_page_at_a_laptops_screen_with_realistic_data(
    past_hour: None,
    web_server: WebServer,
    fleet: list[subprocess.Popen[bytes]],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    from selenium.webdriver.common.by import By

    scene = build_scene(client, conn)
    login(browser, web_server.url, OPERATOR)
    # The fleet's figures come from queue-web's aggregator, which reads on its own
    # schedule: wait until they show the scene (two running jobs, three workers).
    wait_for(browser, lambda d: fleet_figures(d) == ("2", "3"), what="the scene's figures")
    tour = (
        # name, path, an element the page draws, the docs image it is (if any)
        ("overview", "/", "queues-overview", "dashboard-overview"),
        ("jobs", "/jobs", "jobs-table", "dashboard-jobs"),
        ("jobs-failed", "/jobs?status=failed&preview=retry", "bulk-preview", None),
        ("job-failed", f"/jobs/{scene.failed}", "job-error", None),
        ("job-running", f"/jobs/{scene.running}", "job-progress", "dashboard-job"),
        ("job-scheduled", f"/jobs/{scene.scheduled}", "job-runs", None),
        ("job-input", f"/jobs/{scene.input_job}", "job-provide", None),
        ("workflows", "/workflows", "workflows-table", None),
        ("workflow", f"/workflows/{scene.workflow}", "dag", "dashboard-workflow"),
        ("workflow-wide", f"/workflows/{scene.wide}", "dag", None),
        ("queues", "/queues", "queues-table", None),
        ("limits", "/limits", "limits-table", None),
        ("workers", "/workers", "workers-table", None),
        ("schedules", "/schedules", "schedules-table", "dashboard-schedules"),
        ("not-found", "/jobs/999999", "not-found", None),
    )
    problems: list[str] = []
    for name, path, element_id, docs in tour:
        try:
            open_page(browser, web_server.url, path, element_id, timeout=10)
        except AssertionError:
            problems.append(f"{path}: no #{element_id}")
        problems += cut_off(browser, path)
        screenshot(browser, f"tour-{name}", docs=docs, full_page=True)
    assert not problems, "\n".join(problems)

    check_schedules(browser, web_server, scene)
    check_failed_job(browser, web_server, scene)
    check_running_job(browser, web_server, scene)

    click(browser, By.ID, "sign-out")
    wait_for(browser, lambda d: d.find_elements(By.ID, "sign-in"), what="the sign-in form")
    screenshot(browser, "tour-login")
    # Without a login a page sends the visitor to the sign-in form.
    with urllib.request.urlopen(f"{web_server.url}/jobs", timeout=5) as anonymous:
        assert anonymous.url.startswith(f"{web_server.url}/login?next=")


def check_schedules(driver: Any, web_server: WebServer, scene: Scene) -> None:
    """Every schedule's "Run now" is on screen, inside its table, and a click enqueues a job."""
    from selenium.webdriver.common.by import By

    open_page(driver, web_server.url, "/schedules", "schedules-table")
    rows = driver.find_elements(By.CSS_SELECTOR, "#schedules-table tbody tr[data-schedule]")
    assert [r.get_attribute("data-schedule") for r in rows] == sorted(scene.schedules)
    table = rect(driver, driver.find_element(By.CSS_SELECTOR, ".table-wrap"))
    screen = {
        "left": 0,
        "right": driver.execute_script("return document.documentElement.clientWidth;"),
    }
    for row in rows:
        button = row.find_element(By.CSS_SELECTOR, "button.run-now")
        assert inside(rect(driver, button), table), (
            f"Run now of {row.get_attribute('data-schedule')} is cut off"
        )
        assert inside(rect(driver, button), screen)
    name = "cleanup-temp-exports"
    click(driver, By.CSS_SELECTOR, f'tr[data-schedule="{name}"] button.run-now')
    wait_for(
        driver,
        lambda d: re.search(
            rf"schedule {name}: job \d+ enqueued", d.find_element(By.TAG_NAME, "main").text
        ),
        what="the run-now banner",
    )


def check_failed_job(driver: Any, web_server: WebServer, scene: Scene) -> None:
    """A long error and its traceback wrap inside their pane: every word whole, none cut off."""
    from qe_worker_tasks import FEED_URL
    from selenium.webdriver.common.by import By

    open_page(driver, web_server.url, f"/jobs/{scene.failed}", "job-error")
    pane = driver.find_element(By.ID, "job-error")
    width, room = driver.execute_script(
        "return [arguments[0].scrollWidth, arguments[0].clientWidth];", pane
    )
    assert width <= room, f"the error needs {width}px and shows {room}px: it is cut off"
    assert inside(
        rect(driver, pane), rect(driver, driver.find_element(By.CSS_SELECTOR, ".error-panel"))
    )
    text = str(pane.text)
    assert "Traceback (most recent call last):" in text
    assert "The above exception was the direct cause of the following exception:" in text
    # The URL (longer than the pane) is all there, broken only where it must be.
    assert FEED_URL in text.replace("\n", "")
    summary = driver.find_element(By.ID, "job-error-summary").text
    assert summary.startswith("RuntimeError: import of https://exports.example.com/")


def check_running_job(driver: Any, web_server: WebServer, scene: Scene) -> None:
    """A running job's ``{step, of}`` progress is a bar, with its label and its JSON."""
    from selenium.webdriver.common.by import By

    open_page(driver, web_server.url, f"/jobs/{scene.running}", "job-progress")
    progress = driver.find_element(By.ID, "job-progress")
    assert "18 400 of 52 000 · 35%" in progress.text
    assert '"of": 52000' in progress.text and "loading ledger-2026-11-23.csv" in progress.text
    bar = rect(driver, progress.find_element(By.CSS_SELECTOR, ".progress"))
    fill = rect(driver, progress.find_element(By.CSS_SELECTOR, ".progress > span"))
    assert abs(fill["width"] / bar["width"] - 18400 / 52000) < 0.01
