"""The Limits page and the queues page's Top partitions, in a real Chromium at 1366x768.

With the flow scene (``support.flow``: a key at its limit with jobs waiting,
one held, one under its jobs' own limit, partitions of different sizes):
the Limits page lists every key with its bar and waiting count, its form
sets a new limit (the row is written, the banner says so, the page lists
it), a row's Clear removes one; the queues page shows the deepest
partitions of the deepest queue. Nothing scrolls sideways. Screenshots:
``.artifacts/screenshots/limits*.png`` and ``queues-partitions.png``.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support.browser import (  # fixtures too: a conftest.py here would shadow tests/conftest.py
    OPERATOR,
    WebServer,
    browser_fixture,
    chromium_fixture,
    click,
    login,
    screenshot,
    wait_for,
    web_server_fixture,
)
from support.flow import EXPECTED_KEYS, PARTITION_QUEUE, PARTITIONS, build_scene

from queue_engine.operator.limits import set_rate

FIXTURES = (browser_fixture, chromium_fixture, web_server_fixture)

#: Elements wider than the room they have (the page, a table): none at 1366x768.
OVERFLOW = """
return [document.documentElement, ...document.querySelectorAll('.table-wrap, .panel')]
  .filter(e => e.scrollWidth > e.clientWidth + 1)
  .map(e => (e.id || e.className || e.tagName) + ' ' + e.scrollWidth + '>' + e.clientWidth);
"""


def rows_of(driver: Any, table: str, attribute: str) -> dict[str, str]:
    from selenium.webdriver.common.by import By

    return {
        str(r.get_attribute(attribute)): str(r.text)
        for r in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr[{attribute}]")
    }


def limit_rows(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return dict(
        conn.execute("SELECT key, max_running FROM queue_engine.concurrency_limits").fetchall()
    )


def test_limits_page_and_top_partitions(
    web_server: WebServer, browser: Any, conn: psycopg.Connection[Any]
) -> None:
    from selenium.webdriver.common.by import By

    build_scene(conn)
    set_rate(conn, "queue_engine", "api:partner", "20/s", 20)  # a rated key, as a user sets one
    login(browser, web_server.url, OPERATOR)
    click(browser, By.LINK_TEXT, "Limits")  # the nav link
    wait_for(browser, lambda d: d.find_elements(By.ID, "limits-table"), what="the Limits page")
    shown = rows_of(browser, "limits-table", "data-key")
    assert list(shown) == ["src:erp", "api:partner", "held:key", "report:daily"]
    for key, (limit, running, waiting) in EXPECTED_KEYS.items():
        cells = browser.find_elements(By.CSS_SELECTOR, f'tr[data-key="{key}"] td')
        assert f"{running} / {limit}" in cells[1].text, shown[key]
        assert cells[2].text == str(waiting), shown[key]
    assert "full" in shown["src:erp"] and "held" in shown["held:key"]
    assert "job's own" in shown["report:daily"]
    assert browser.execute_script(OVERFLOW) == []
    screenshot(browser, "limits", full_page=True)

    # Set a new limit through the form.
    form = browser.find_element(By.ID, "limit-form")
    form.find_element(By.NAME, "key").send_keys("src:crm")
    form.find_element(By.NAME, "max_running").send_keys("2")
    click(browser, By.ID, "limit-set")
    wait_for(
        browser,
        lambda d: (
            "key src:crm: at most 2 running (was none)" in d.find_element(By.TAG_NAME, "main").text
        ),
        what="the banner of the set",
    )
    assert limit_rows(conn)["src:crm"] == 2
    assert "0 / 2" in rows_of(browser, "limits-table", "data-key")["src:crm"]
    screenshot(browser, "limits-set", full_page=True)

    # A bad limit is refused with a banner, nothing written.
    form = browser.find_element(By.ID, "limit-form")
    browser.execute_script("arguments[0].noValidate = true;", form)  # past the browser's check
    form.find_element(By.NAME, "key").send_keys("src:crm")
    form.find_element(By.NAME, "max_running").send_keys("-3")
    click(browser, By.ID, "limit-set")
    wait_for(
        browser,
        lambda d: "invalid limit '-3'" in d.find_element(By.TAG_NAME, "main").text,
        what="the refusal banner",
    )
    assert limit_rows(conn)["src:crm"] == 2

    # Clear the held key's limit from its row.
    click(browser, By.CSS_SELECTOR, 'tr[data-key="held:key"] button.danger')
    wait_for(
        browser,
        lambda d: "key held:key: limit 0 removed" in d.find_element(By.TAG_NAME, "main").text,
        what="the banner of the clear",
    )
    assert "held:key" not in limit_rows(conn)
    # Recent changes: the set and the clear, newest first, with the login's name.
    recent = browser.find_elements(By.CSS_SELECTOR, "#recent-changes tbody tr")
    cells = [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in recent[:2]]
    assert [c[1:3] for c in cells] == [["limit_clear", "held:key"], ["limit_set", "src:crm"]]
    assert f"{OPERATOR[0]} (dashboard)" in recent[0].text
    assert browser.execute_script(OVERFLOW) == []

    # The queues page: the deepest queue's top partitions.
    browser.get(f"{web_server.url}/queues")
    wait_for(
        browser,
        lambda d: rows_of(d, "partitions-table", "data-partition"),
        what="the Top partitions panel",
    )
    parts = rows_of(browser, "partitions-table", "data-partition")
    assert list(parts) == list(PARTITIONS)
    for part, (queued, running) in PARTITIONS.items():
        assert parts[part].split() == [part, str(queued), str(running)]
    chosen = browser.find_element(By.CSS_SELECTOR, "#partitions-queue option:checked")
    assert chosen.get_attribute("value") == PARTITION_QUEUE  # the deepest queue by default
    assert browser.execute_script(OVERFLOW) == []
    screenshot(browser, "queues-partitions", full_page=True)
