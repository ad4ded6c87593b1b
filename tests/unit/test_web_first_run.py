"""queue-web's first run, without a database: the sign-in link, its session, the browser's 401.

The process tests (tests/process/test_web_process.py) run the real binary;
these hold the rules: which addresses are loopback, what "nothing configured"
means, that the link's session is this process's alone, and which ``Accept``
headers are a browser's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.requests import Request

from queue_engine.foundation.errors import ConfigError
from queue_engine.web.auth import (
    LINK_USER,
    Principal,
    link_cookie,
    link_user,
    session_cookie,
    session_user,
)
from queue_engine.web.first_run import (
    DOCS,
    DOCS_URL,
    SignInLink,
    is_loopback,
    nothing_configured,
    sign_in_link,
)
from queue_engine.web.pages.login import prefers_html
from queue_engine.web.settings import Scope, User, WebSettings

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.20", False),
        ("10.0.0.5", False),
        ("fe80::1", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_any_credential_or_anonymous_access_turns_the_link_off() -> None:
    assert nothing_configured(WebSettings())
    for configured in (
        WebSettings(tokens={"t" * 20: Scope.READ}),
        WebSettings(users={"ada": User("ada", Scope.READ, "pw")}),
        WebSettings(anonymous=Scope.READ, host="0.0.0.0"),
    ):
        assert not nothing_configured(configured)
        assert sign_in_link(configured) is None  # and no refusal, whatever the host
    assert isinstance(sign_in_link(WebSettings(host="::1")), SignInLink)


def test_nothing_configured_off_loopback_is_one_line_naming_what_to_set() -> None:
    with pytest.raises(ConfigError) as caught:
        sign_in_link(WebSettings(host="0.0.0.0"))
    message = str(caught.value)
    assert "\n" not in message and "0.0.0.0" in message
    assert "QUEUE_ENGINE_WEB_USERS" in message and "QUEUE_ENGINE_WEB_TOKENS" in message
    assert caught.value.exit_code == 2


def test_the_link_is_random_compared_whole_and_never_in_a_repr() -> None:
    one, two = SignInLink(), SignInLink()
    assert one.token != two.token and len(one.token) >= 40
    assert one.session_key != one.token
    assert one.matches(one.token)
    for wrong in (two.token, one.token[:-1], one.token + "x", ""):
        assert not one.matches(wrong)
    assert one.token not in repr(one) and one.session_key not in repr(one)
    assert one.url("127.0.0.1", 8080) == f"http://127.0.0.1:8080/login?token={one.token}"
    assert one.url("::1", 9000).startswith("http://[::1]:9000/login?token=")
    assert one.url("[::1]", 9000).startswith("http://[::1]:9000/login?token=")
    assert (
        SignInLink(token="a+b/c").url("localhost", 1) == "http://localhost:1/login?token=a%2Bb%2Fc"
    )


def test_the_links_session_is_operator_for_this_process_only() -> None:
    link = SignInLink()
    cookie = link_cookie(link, now=1000.0)
    assert link.token not in cookie and link.session_key not in cookie
    assert link_user(link, cookie, now=1001.0) == Principal(LINK_USER, Scope.OPERATOR, "session")
    assert link_user(link, cookie, now=1000.0 + 13 * 3600) is None  # expired like a login
    assert link_user(SignInLink(), cookie, now=1001.0) is None  # the next process's link
    assert link_user(link, cookie[:-1] + ("0" if cookie[-1] != "0" else "1"), now=1001.0) is None
    # A login cookie is not a link session, and the reverse, even under one secret.
    settings = WebSettings(session_secret=link.session_key, users={})
    assert session_user(settings, cookie, now=1001.0) is None
    assert link_user(link, session_cookie(settings, "ada", now=1000.0), now=1001.0) is None


def request_accepting(accept: str | None) -> Request:
    headers = [] if accept is None else [(b"accept", accept.encode())]
    return Request({"type": "http", "method": "GET", "headers": headers, "path": "/"})


CHROMIUM = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (CHROMIUM, True),
        (FIREFOX, True),
        ("text/html", True),
        ("application/json;q=0.5, text/html", True),
        (None, False),  # no header: an HTTP library
        ("*/*", False),  # curl, httpx, requests, fetch()
        ("application/json", False),
        ("application/problem+json", False),
        ("text/html, application/json", False),  # a tie is the API's
        ("text/html;q=0.5, application/json", False),
        ("text/html;q=0", False),
        ("text/html;q=oops, */*", False),
        ("text/event-stream", False),
    ],
)
def test_a_browser_is_who_ranks_html_above_json(accept: str | None, html: bool) -> None:
    assert prefers_html(request_accepting(accept)) is html


def test_the_docs_links_point_at_a_section_that_exists() -> None:
    path, _, anchor = DOCS.partition("#")
    headings = re.findall(r"^#+ (.+)$", (REPO / path).read_text(), flags=re.MULTILINE)
    slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert anchor in slugs
    unit = (REPO / "systemd" / "queue-web.service").read_text()
    documentation = re.search(r"^Documentation=(\S+)$", unit, flags=re.MULTILINE)
    assert documentation is not None
    assert documentation.group(1).removesuffix("docs/guides/web.md") + DOCS == DOCS_URL
