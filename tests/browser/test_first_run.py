"""The first run in Chromium: the sign-in page a stranger sees, and the printed link.

``queue-web`` with nothing configured prints a sign-in link; a browser that
opens it lands on the overview signed in as operator and can press an
operator's button. Screenshots at 1366x768 of the sign-in page as a visitor
without a session sees it: on a first run, after a wrong link, and on a
server with logins configured.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support.browser import (  # fixtures too: a conftest.py here would shadow tests/conftest.py
    WebServer,
    browser_fixture,
    chromium_fixture,
    click,
    first_run_server_fixture,
    screenshot,
    set_viewport,
    wait_for,
    web_server_fixture,
)

from queue_engine import Client

FIXTURES = (browser_fixture, chromium_fixture, first_run_server_fixture, web_server_fixture)
Q = "first-run"


def text_of(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.ID, element_id).text)


def test_the_printed_link_signs_the_browser_in_as_operator(
    first_run_server: WebServer, browser: Any, client: Client, conn: psycopg.Connection[Any]
) -> None:
    from selenium.webdriver.common.by import By

    client.enqueue("echo", queue=Q, args={"n": 1})
    url = first_run_server.url
    set_viewport(browser, 1366, 768)

    # A stranger opening the dashboard is sent to the sign-in page, which says what to do.
    browser.get(f"{url}/")
    wait_for(browser, lambda d: d.find_elements(By.ID, "first-run"), what="the sign-in page")
    assert browser.current_url == f"{url}/login?next=/"
    assert "printed a sign-in link" in text_of(browser, "first-run")
    configure = text_of(browser, "configure")
    assert "QUEUE_ENGINE_WEB_USERS=name:operator:password" in configure
    assert browser.find_elements(By.ID, "configure-docs")
    assert not browser.find_elements(By.ID, "login-form")  # no logins: no form to fill
    screenshot(browser, "sign-in-first-run")

    browser.get(f"{url}/login?token=an-old-link-from-yesterday")
    wait_for(browser, lambda d: d.find_elements(By.ID, "sign-in-error"), what="the refusal")
    assert "This sign-in link is not valid" in text_of(browser, "sign-in-error")
    screenshot(browser, "sign-in-wrong-link")

    # The printed link: the overview, signed in as operator, the token gone from the URL.
    link = first_run_server.sign_in_link()
    browser.get(link)
    wait_for(browser, lambda d: d.find_elements(By.ID, "live-dot"), what="the overview")
    assert browser.current_url == f"{url}/"
    assert "sign-in link · operator" in browser.find_element(By.CLASS_NAME, "who").text
    assert browser.find_elements(By.ID, "sign-out")
    wait_for(browser, lambda d: Q in d.find_element(By.TAG_NAME, "main").text, what="the queue")
    screenshot(browser, "sign-in-link-signed-in")

    # An operator's button works with that session.
    browser.get(f"{url}/queues")
    wait_for(browser, lambda d: d.find_elements(By.NAME, "pause"), what="the pause button")
    click(browser, By.NAME, "pause")
    wait_for(browser, lambda d: "paused" in text_of(d, "queues-table"), what="paused on the page")
    row = conn.execute("SELECT paused FROM queue_engine.queues WHERE name = %s", (Q,)).fetchone()
    assert row == (True,)


def test_the_sign_in_page_with_logins_configured(web_server: WebServer, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    set_viewport(browser, 1366, 768)
    browser.get(f"{web_server.url}/jobs")
    wait_for(browser, lambda d: d.find_elements(By.ID, "login-form"), what="the sign-in form")
    assert browser.current_url == f"{web_server.url}/login?next=/jobs"
    assert "QUEUE_ENGINE_WEB_USERS" in text_of(browser, "configure")
    assert not browser.find_elements(By.ID, "first-run")
    screenshot(browser, "sign-in-form")
