"""Signing in against a real Postgres: a browser's 401 is the sign-in page, the first-run link.

A browser (``Accept`` ranking ``text/html`` first) never gets raw JSON for a
401: it is sent to the sign-in page, which says how to configure logins; an
API client keeps its problem+json. The first-run link (``queue-web`` with
nothing configured, see tests/process/test_web_process.py for the real binary)
signs a browser in as operator, for this app only.
"""

from __future__ import annotations

import base64
from typing import Any

import psycopg
from support.web import OPERATOR, is_problem, web_client

from queue_engine.web.first_run import DOCS_URL, SignInLink

#: What Chromium sends when it navigates to a page.
BROWSER = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
    "image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
}
#: The sign-in page's sentence on configuring logins, where none are configured.
CONFIGURE = "QUEUE_ENGINE_WEB_USERS=name:operator:password"


def sign_in_page(response: Any, status: int) -> str:
    """Assert ``response`` is the sign-in page with ``status``; return its text."""
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("text/html"), response.headers
    text: str = response.text
    assert "<h1>Sign in</h1>" in text and 'id="configure"' in text and DOCS_URL in text
    assert "QUEUE_ENGINE_WEB_USERS" in text
    return text


def test_a_browser_without_credential_is_sent_to_the_sign_in_page_an_api_client_gets_json(
    dsn: str,
) -> None:
    with web_client(dsn) as web:
        for path in ("/api/v1/jobs", "/api/v1/queues?paused=1", "/", "/jobs"):
            seen = web.get(path, headers=BROWSER, follow_redirects=False)
            assert seen.status_code == 303, (path, seen.status_code, seen.text[:200])
            assert seen.headers["location"].startswith("/login?next=/"), seen.headers
            assert "problem+json" not in seen.headers.get("content-type", "")
            sign_in_page(web.get(seen.headers["location"], headers=BROWSER), 200)
        assert web.get("/api/v1/jobs", headers=BROWSER, follow_redirects=False).headers[
            "location"
        ] == ("/login?next=/api/v1/jobs")
        for accept in ("application/json", "*/*", "application/problem+json"):
            answer = web.get("/api/v1/jobs", headers={"Accept": accept})
            is_problem(answer, 401)
            assert "Basic" in answer.headers["www-authenticate"]
            assert answer.headers["vary"] == "Accept"
        browser = web.get("/api/v1/jobs", headers=BROWSER, follow_redirects=False)
        assert browser.headers["vary"] == "Accept"


def test_a_browser_with_no_login_configured_gets_the_page_that_says_how(dsn: str) -> None:
    """Tokens only: the pages used to answer raw 401 JSON; now the page and one sentence."""
    with web_client(dsn, users={}) as web:
        seen = web.get("/", headers=BROWSER, follow_redirects=False)
        assert (seen.status_code, seen.headers.get("location")) == (303, "/login?next=/")
        page = sign_in_page(web.get("/login", headers=BROWSER), 200)
        assert 'id="no-logins"' in page and 'id="login-form"' not in page and CONFIGURE in page
        assert web.get("/api/v1/jobs", headers=OPERATOR).status_code == 200  # tokens still work


def test_a_browser_with_a_wrong_credential_gets_the_page_with_the_reason(dsn: str) -> None:
    wrong = {"Authorization": "Basic " + base64.b64encode(b"ada:nope").decode()}
    with web_client(dsn) as web:
        page = sign_in_page(web.get("/api/v1/jobs", headers=BROWSER | wrong), 401)
        assert "Wrong user name or password." in page
        assert "Basic" in web.get("/", headers=BROWSER | wrong).headers["www-authenticate"]
        is_problem(web.get("/api/v1/jobs", headers=wrong), 401)


def test_a_button_pressed_without_a_session_goes_to_the_sign_in_page(dsn: str) -> None:
    with web_client(dsn) as web:
        pressed = web.post(
            "/actions/queues/q/pause",
            headers=BROWSER | {"Sec-Fetch-Site": "same-origin"},
            follow_redirects=False,
        )
        # Not /login?next=/actions/...: a redirect cannot repeat a POST.
        assert (pressed.status_code, pressed.headers["location"]) == (303, "/login")


def test_the_sign_in_link_signs_a_browser_in_as_operator_for_this_app_only(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    link = SignInLink()
    with web_client(dsn, tokens={}, users={}, sign_in_link=link) as web:
        page = sign_in_page(web.get("/login", headers=BROWSER), 200)
        assert 'id="first-run"' in page and 'id="login-form"' not in page and CONFIGURE in page
        assert ">http://testserver/login?token=…</pre>" in page
        for wrong in ("nope", link.token[:-1], SignInLink().token, ""):
            refused = sign_in_page(web.get("/login", params={"token": wrong}), 401)
            assert "This sign-in link is not valid" in refused
            assert wrong not in refused or wrong == ""
        assert web.cookies.get("qe_session") is None
        signed = web.get(
            "/login", params={"token": link.token, "next": "/queues"}, follow_redirects=False
        )
        assert (signed.status_code, signed.headers["location"]) == (303, "/queues")
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and link.token not in cookie
        assert link.token not in signed.text
        queues = web.get("/queues", headers=BROWSER)
        assert queues.status_code == 200 and "sign-in link · operator" in queues.text
        assert web.post("/api/v1/queues/first/pause").status_code == 200  # an operator action
        row = conn.execute("SELECT paused FROM queue_engine.queues WHERE name = 'first'")
        assert row.fetchone() == (True,)
        session = web.cookies["qe_session"]
    # The next process makes another link: the old session and the old link are refused.
    with web_client(dsn, tokens={}, users={}, sign_in_link=SignInLink()) as web:
        web.cookies.set("qe_session", session)
        is_problem(web.post("/api/v1/queues/first/resume"), 401)
        assert web.get("/", headers=BROWSER, follow_redirects=False).status_code == 303
        sign_in_page(web.get("/login", params={"token": link.token}), 401)


def test_a_token_where_credentials_are_configured_is_refused_with_a_sentence(dsn: str) -> None:
    with web_client(dsn) as web:
        page = sign_in_page(web.get("/login", params={"token": "x" * 43}), 401)
        assert "Sign-in links work only while queue-web has no logins or tokens" in page
        assert 'id="login-form"' in page and web.cookies.get("qe_session") is None
