"""queue-web's credentials and checks, without a database: parsing, cookies, scopes, CSRF."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from queue_engine.foundation.errors import ConfigError
from queue_engine.web.auth import Principal, session_cookie, session_user
from queue_engine.web.csrf import refusal
from queue_engine.web.settings import (
    Scope,
    User,
    WebSettings,
    parse_origins,
    parse_tokens,
    parse_users,
)

TOKEN = "a-token-of-enough-length"


def test_tokens_parse_and_errors_never_quote_the_token() -> None:
    assert parse_tokens(f" read:{TOKEN} , operator:{TOKEN}x") == {
        TOKEN: Scope.READ,
        TOKEN + "x": Scope.OPERATOR,
    }
    assert parse_tokens(None) == {} and parse_tokens("") == {}
    for raw, message in (
        (f"admin:{TOKEN}", "unknown scope 'admin'"),
        (TOKEN, "is not scope:token"),
        ("read:short", "at least 16 characters"),
        (f"read:{TOKEN},read:", "entry 2"),
    ):
        with pytest.raises(ConfigError, match=message) as caught:
            parse_tokens(raw)
        assert TOKEN not in str(caught.value) and "short" not in str(caught.value).split(":")[-1]


def test_users_parse_a_password_may_hold_colons() -> None:
    users = parse_users("ada:operator:pa:ss, rex:READ:pw")
    assert users["ada"].password == "pa:ss" and users["ada"].scope is Scope.OPERATOR
    assert users["rex"].scope is Scope.READ
    assert "pa:ss" not in repr(users["ada"])
    for raw in ("ada:operator", "ada:boss:pw", ":read:pw", "ada:read:"):
        with pytest.raises(ConfigError, match="QUEUE_ENGINE_WEB_USERS"):
            parse_users(raw)


def test_origins_and_settings_from_env() -> None:
    assert parse_origins("https://a.example/, http://b:8080") == {
        "https://a.example",
        "http://b:8080",
    }
    with pytest.raises(ConfigError, match="not an origin"):
        parse_origins("a.example")
    env = {
        "QUEUE_ENGINE_DSN": "host=db",
        "QUEUE_ENGINE_WEB_TOKENS": f"producer:{TOKEN}",
        "QUEUE_ENGINE_WEB_ANONYMOUS": "read",
        "QUEUE_ENGINE_WEB_READ_ONLY": "on",
        "QUEUE_ENGINE_WEB_PORT": "9000",
    }
    settings = WebSettings.from_env(env, host="0.0.0.0")
    assert settings.tokens == {TOKEN: Scope.PRODUCER} and settings.anonymous is Scope.READ
    assert settings.read_only and settings.max_scope() is Scope.READ
    assert (settings.host, settings.port, settings.dsn) == ("0.0.0.0", 9000, "host=db")
    with pytest.raises(ConfigError, match="QUEUE_ENGINE_WEB_PORT"):
        WebSettings.from_env({"QUEUE_ENGINE_WEB_PORT": "70000"})


def test_scopes_include_the_ones_below() -> None:
    operator = Principal("x", Scope.OPERATOR, "token")
    read = Principal("y", Scope.READ, "token")
    assert operator.allows(Scope.READ) and operator.allows(Scope.PRODUCER)
    assert read.allows(Scope.READ) and not read.allows(Scope.PRODUCER)


def test_session_cookie_signed_expiring_and_tied_to_a_configured_user() -> None:
    settings = WebSettings(
        users={"ada": User("ada", Scope.OPERATOR, "pw")}, session_secret="s" * 32
    )
    cookie = session_cookie(settings, "ada", now=1000.0)
    assert "pw" not in cookie
    assert session_user(settings, cookie, now=1001.0) == Principal("ada", Scope.OPERATOR, "session")
    assert session_user(settings, cookie, now=1000.0 + 13 * 3600) is None  # expired
    assert (
        session_user(settings, cookie[:-1] + ("0" if cookie[-1] != "0" else "1"), now=1001.0)
        is None
    )
    other_key = WebSettings(users=settings.users, session_secret="t" * 32)
    assert session_user(other_key, cookie, now=1001.0) is None
    gone = WebSettings(users={}, session_secret="s" * 32)
    assert session_user(gone, cookie, now=1001.0) is None
    assert session_user(settings, "garbage", now=1001.0) is None


def request(method: str, headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": "ops:8080", **headers}.items()]
    return Request(
        {
            "type": "http",
            "method": method,
            "headers": raw,
            "scheme": "http",
            "path": "/",
            "query_string": b"",
        }
    )


@pytest.mark.parametrize(
    ("method", "headers", "refused"),
    [
        ("GET", {"Sec-Fetch-Site": "cross-site"}, False),
        ("POST", {}, False),
        ("POST", {"Sec-Fetch-Site": "same-origin"}, False),
        ("POST", {"Sec-Fetch-Site": "none"}, False),
        ("POST", {"Sec-Fetch-Site": "cross-site"}, True),
        ("POST", {"Sec-Fetch-Site": "same-site"}, True),
        ("DELETE", {"Origin": "http://evil.example"}, True),
        ("POST", {"Origin": "null"}, True),
        ("POST", {"Origin": "http://ops:8080"}, False),
        ("POST", {"Origin": "https://trusted.example"}, False),
        ("POST", {"Authorization": "Bearer x", "Sec-Fetch-Site": "cross-site"}, False),
        ("POST", {"Authorization": "Basic eDp5", "Sec-Fetch-Site": "cross-site"}, True),
    ],
)
def test_csrf_rule(method: str, headers: dict[str, str], refused: bool) -> None:
    why = refusal(request(method, headers), frozenset({"https://trusted.example"}))
    assert (why is not None) is refused, why


def test_outage_warning_at_most_once_a_minute() -> None:
    from queue_engine.web.state import WebState

    state = WebState(WebSettings())
    assert state.outage_warning_due(now=100.0)
    assert not state.outage_warning_due(now=130.0)
    assert state.outage_warning_due(now=161.0)
