"""The workflow pages in a real Chromium: the DAG fills in as a real worker runs it.

An operator watches a workflow run (a fan-out folded into one box), provides
its input node's value from the page, and sees it finish; a read-only login
sees the same drawing and no button. Screenshots go to
``.artifacts/screenshots/`` like the other browser tests.
"""

from __future__ import annotations

import subprocess
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
from support.scene import awaiting_approval, nightly_etl
from support.workers import wait_until

from queue_engine import Client
from queue_engine.producer.workflows import Workflow

S = "queue_engine"
Q = "wt"
FIXTURES = (browser_fixture, chromium_fixture, web_server_fixture, worker_fixture)


def state_of(conn: psycopg.Connection[Any], workflow_id: int) -> str:
    row = conn.execute(f"SELECT state FROM {S}.workflows WHERE id = %s", (workflow_id,)).fetchone()
    assert row is not None
    return str(row[0])


def state_text(driver: Any) -> str:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        return str(driver.find_element(By.ID, "workflow-state").text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def page_text(driver: Any) -> str:
    """The page's main text; "" while a navigation (a form's POST, a redirect) replaces it."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        return str(driver.find_element(By.TAG_NAME, "main").text)
    except (NoSuchElementException, StaleElementReferenceException):
        return ""


def test_an_operator_follows_a_workflow_and_provides_its_input(
    web_server: WebServer,
    worker: subprocess.Popen[bytes],
    browser: Any,
    client: Client,
    conn: psycopg.Connection[Any],
) -> None:
    from selenium.webdriver.common.by import By

    info = client.start_workflow(nightly_etl())
    wait_until(lambda: awaiting_approval(client, info.id), what="the input node awaiting its value")
    login(browser, web_server.url, OPERATOR)
    browser.get(f"{web_server.url}/workflows")
    wait_for(browser, lambda d: d.find_elements(By.ID, "workflows-table"), what="the list")
    screenshot(browser, "workflows")
    # Six pages in the top bar still fit a 1366px laptop screen, without a sideways scroll.
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth"
    )
    browser.get(f"{web_server.url}/workflows/{info.id}")
    wait_for(browser, lambda d: d.find_elements(By.ID, "dag"), what="the DAG")
    text = page_text(browser)
    assert "8 nodes: 8 succeeded" in text and "awaiting input" in text
    assert "this input can never work" in text  # the failed node's error, in its box
    screenshot(browser, "workflow-awaiting-input")
    form = browser.find_element(By.CSS_SELECTOR, "#inputs form")
    form.find_element(By.NAME, "value").send_keys('{"approved_by": "ana"}')
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: "provided" in page_text(d), what="the banner")
    browser.execute_script("window.__qeMarker = 'not reloaded';")
    wait_until(lambda: state_of(conn, info.id) != "running", what="the workflow ended")
    assert state_of(conn, info.id) == "failed"  # check failed; report ran anyway (finished)
    # The page follows by itself: its facts and its DAG are polled while it runs.
    wait_for(browser, lambda d: state_text(d) == "failed", what="failed on the page")
    wait_for(browser, lambda d: "publish\nsucceeded" in page_text(d), what="publish drawn done")
    assert browser.execute_script("return window.__qeMarker === 'not reloaded';")
    screenshot(browser, "workflow")
    # The retry button came with the live facts, without a reload.
    wait_for(browser, lambda d: d.find_elements(By.ID, "retry-workflow"), what="retry offered")
    click(browser, By.ID, "retry-workflow")
    wait_for(browser, lambda d: "1 node(s) run again" in page_text(d), what="the retry banner")

    login(browser, web_server.url, VIEWER)
    browser.get(f"{web_server.url}/workflows/{info.id}")
    wait_for(browser, lambda d: d.find_elements(By.ID, "dag"), what="the DAG, read-only")
    forms = browser.find_elements(By.CSS_SELECTOR, "main form[method=post]")
    assert forms == []


def test_a_ten_thousand_node_workflow_reads_at_a_glance(
    web_server: WebServer, browser: Any, client: Client
) -> None:
    from selenium.webdriver.common.by import By

    wf = Workflow("wide-fan")
    wf.add("split", "echo", queue=Q)
    for i in range(10_000):
        wf.add(f"chunk-{i}", "echo", queue=Q, args={"chunk": i}, after=["split"])
    wf.add("combine", "echo", queue=Q, after=[f"chunk-{i}" for i in range(10_000)])
    info = client.start_workflow(wf)
    client.cancel_workflow(info.id)
    login(browser, web_server.url, OPERATOR)
    browser.get(f"{web_server.url}/workflows/{info.id}")
    wait_for(browser, lambda d: d.find_elements(By.ID, "dag"), what="the DAG")
    boxes = browser.find_elements(By.CSS_SELECTOR, ".dag-node")
    assert len(boxes) == 3
    assert "10 000 nodes: 10 000 canceled" in boxes[1].text
    assert "and 9 994 more" in boxes[1].text
    assert "after chunk-0 … chunk-9999" in boxes[2].text
    screenshot(browser, "workflow-wide")
