"""queue-web's security against a real Postgres: scopes, the database's own refusal, CSRF, secrets."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import pytest
from fastapi import Depends, Request
from fastapi.testclient import TestClient
from psycopg.conninfo import make_conninfo
from support.jobs import count_jobs as job_count
from support.web import (
    OPERATOR,
    OPERATOR_TOKEN,
    PRODUCER,
    READ,
    SECRETS,
    basic,
    bearer,
    is_problem,
    web_client,
)

from queue_engine.operator.roles import roles_sql
from queue_engine.web.api.deps import client as borrowed_client
from queue_engine.web.auth import SESSION_COOKIE, Principal, require_read, session_cookie
from queue_engine.web.settings import Scope, WebSettings

SUFFIX = str(os.getpid())
GROUPS = {"producer": f"qe_w_producer_{SUFFIX}", "monitor": f"qe_w_monitor_{SUFFIX}"}
LOGINS = {kind: f"{name}_login" for kind, name in GROUPS.items()}
ROLE_PASSWORD = "role-pw-9f8e7d6c5b4a"


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn) as c:
        yield c


@pytest.fixture
def role_dsns(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[dict[str, str]]:
    """The producer and monitor roles of `queue-ctl roles`, one login each."""
    conn.execute(
        roles_sql(
            "queue_engine",
            worker=f"qe_w_worker_{SUFFIX}",
            producer=GROUPS["producer"],
            monitor=GROUPS["monitor"],
        ).encode()
    )
    for kind, login in LOGINS.items():
        conn.execute(
            f"CREATE ROLE {login} LOGIN PASSWORD '{ROLE_PASSWORD}' IN ROLE {GROUPS[kind]}".encode()
        )
    try:
        yield {
            k: make_conninfo(dsn, user=login, password=ROLE_PASSWORD) for k, login in LOGINS.items()
        }
    finally:
        names = [*LOGINS.values(), *GROUPS.values(), f"qe_w_worker_{SUFFIX}"]
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)",
            (list(LOGINS.values()),),
        )
        conn.execute(f"DROP OWNED BY {', '.join(names)}".encode())
        conn.execute(f"DROP ROLE {', '.join(names)}".encode())


def test_no_or_wrong_credential_is_401_with_a_challenge(api: TestClient) -> None:
    for headers in (
        {},
        bearer("not-a-token-at-all-xx"),
        basic("ada", "wrong"),
        {"Authorization": "Digest x"},
    ):
        body = is_problem(api.get("/api/v1/jobs", headers=headers), 401)
        assert "not-a-token" not in body["detail"]
    r = api.get("/api/v1/jobs")
    assert "Bearer" in r.headers["www-authenticate"] and "Basic" in r.headers["www-authenticate"]


def test_scopes_are_enforced_by_the_server(api: TestClient, conn) -> None:
    assert api.get("/api/v1/jobs", headers=READ).status_code == 200
    refused = is_problem(api.post("/api/v1/jobs", json={"task": "t"}, headers=READ), 403)
    assert "producer" in refused["detail"]
    job_id = api.post("/api/v1/jobs", json={"task": "t"}, headers=PRODUCER).json()["id"]
    assert (
        "operator"
        in is_problem(api.post(f"/api/v1/jobs/{job_id}/cancel", headers=PRODUCER), 403)["detail"]
    )
    assert is_problem(api.post("/api/v1/queues/q/pause", headers=READ), 403)
    assert is_problem(
        api.post("/api/v1/jobs/bulk/cancel", json={"ids": [job_id]}, headers=READ), 403
    )
    assert api.post(f"/api/v1/jobs/{job_id}/cancel", headers=OPERATOR).status_code == 200
    assert job_count(conn) == 1


def test_read_only_server_refuses_every_write_whatever_the_token(dsn: str, conn) -> None:
    with web_client(dsn, read_only=True) as api:
        assert (
            "read-only"
            in is_problem(api.post("/api/v1/jobs", json={"task": "t"}, headers=OPERATOR), 403)[
                "detail"
            ]
        )
        assert api.get("/api/v1/jobs", headers=OPERATOR).status_code == 200
        assert api.get("/info").json()["read_only"] is True
    assert job_count(conn) == 0


def test_basic_auth_and_login_cookie(api: TestClient) -> None:
    assert api.get("/api/v1/queues", headers=basic("rex", "rex-password-42")).status_code == 200
    assert is_problem(
        api.post("/api/v1/queues/q/pause", headers=basic("rex", "rex-password-42")), 403
    )
    assert (
        api.post("/api/v1/queues/q/pause", headers=basic("ada", "ada-password-42")).status_code
        == 200
    )
    settings: WebSettings = api.app.state.web.settings  # type: ignore[attr-defined]
    cookie = session_cookie(settings, "ada")
    api.cookies.set(SESSION_COOKIE, cookie)
    assert api.post("/api/v1/queues/q/resume").status_code == 200
    api.cookies.set(SESSION_COOKIE, cookie[:-2] + "00")  # tampered signature
    assert is_problem(api.post("/api/v1/queues/q/resume"), 401)
    api.cookies.clear()
    expired = session_cookie(settings, "ada", now=0)
    api.cookies.set(SESSION_COOKIE, expired)
    assert is_problem(api.get("/api/v1/queues"), 401)


def test_anonymous_read_when_configured(dsn: str) -> None:
    with web_client(dsn, anonymous=Scope.READ) as api:
        assert api.get("/api/v1/jobs").status_code == 200
        assert is_problem(api.post("/api/v1/jobs", json={"task": "t"}), 403)
        # A wrong credential is refused, not downgraded to anonymous.
        assert is_problem(api.get("/api/v1/jobs", headers=bearer("wrong-token-0123456789")), 401)


def test_cross_site_form_post_is_refused_and_writes_nothing(api: TestClient, conn) -> None:
    """A page on another site posting a form to queue-web with the operator's basic auth."""
    ada = basic("ada", "ada-password-42")
    form = {"task": "evil"}
    forged = api.post(
        "/api/v1/queues/q/pause",
        data=form,
        headers={**ada, "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
    )
    assert "cross-site" in is_problem(forged, 403)["detail"]
    old_browser = api.post(
        "/api/v1/queues/q/pause", data=form, headers={**ada, "Origin": "https://evil.example"}
    )
    assert "cross-origin" in is_problem(old_browser, 403)["detail"]
    same_site = api.post("/api/v1/queues/q/pause", headers={**ada, "Sec-Fetch-Site": "same-site"})
    assert is_problem(same_site, 403)
    paused = conn.execute("SELECT count(*) FROM queue_engine.queues WHERE paused").fetchone()
    assert paused == (0,)
    # The dashboard's own requests, a script without browser headers, and bearer-token code pass.
    own = api.post(
        "/api/v1/queues/q/pause",
        headers={**ada, "Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"},
    )
    assert own.status_code == 200, own.text
    assert api.post("/api/v1/queues/q/resume", headers=ada).status_code == 200
    with_token = api.post(
        "/api/v1/queues/q/pause", headers={**OPERATOR, "Sec-Fetch-Site": "cross-site"}
    )
    assert with_token.status_code == 200


def test_trusted_origin_may_post(dsn: str) -> None:
    ada = basic("ada", "ada-password-42")
    with web_client(dsn, trusted_origins=frozenset({"https://ops.example.com"})) as api:
        ok = api.post(
            "/api/v1/queues/q/pause", headers={**ada, "Origin": "https://ops.example.com"}
        )
        assert ok.status_code == 200
        assert is_problem(
            api.post("/api/v1/queues/q/pause", headers={**ada, "Origin": "https://x.example.com"}),
            403,
        )


def test_read_scope_uses_the_monitor_role_and_the_database_refuses_writes(
    dsn: str, role_dsns: dict[str, str], conn
) -> None:
    """With the monitor DSN, a read-scope request cannot write even if a route tried to."""
    with web_client(dsn, read_dsn=role_dsns["monitor"], producer_dsn=role_dsns["producer"]) as api:
        # A route with a bug: it writes under the read scope. The server's check passes it;
        # the database, connected as the monitor role, refuses it.
        @api.app.post("/test-only/write-with-read-scope")  # type: ignore[attr-defined]
        def buggy(
            request: Request, principal: Annotated[Principal, Depends(require_read)]
        ) -> dict[str, int]:
            with borrowed_client(request, principal) as c:
                return {"id": c.enqueue("sneaky").id}

        refused = is_problem(api.post("/test-only/write-with-read-scope", headers=READ), 403)
        assert refused["type"].endswith("database-refused")
        assert ROLE_PASSWORD not in refused["detail"]
        assert job_count(conn) == 0
        # Reads work as the monitor role; producers enqueue as the producer role.
        assert api.get("/api/v1/queues", headers=READ).status_code == 200
        created = api.post("/api/v1/jobs", json={"task": "t"}, headers=PRODUCER)
        assert created.status_code == 201, created.text
        assert (
            api.get("/api/v1/jobs", headers=READ).json()["items"][0]["id"] == created.json()["id"]
        )
        sessions = conn.execute(
            "SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name = 'queue-engine-web'"
        ).fetchall()
        assert {LOGINS["monitor"], LOGINS["producer"]} <= {r[0] for r in sessions}
    assert job_count(conn) == 1


def test_no_secret_in_any_body_or_log_line(dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    """DSN passwords and tokens never reach a body (success, error, outage) or the log."""
    db_password = "db-pw-Zq81x0"
    down = make_conninfo(dsn, host="127.0.0.1", port="1", password=db_password)
    up = make_conninfo(dsn, password=db_password)
    secrets = (*SECRETS, db_password)
    bodies: list[str] = []
    caplog.set_level(logging.DEBUG)
    for target in (up, down):
        with web_client(target, read_dsn=target, producer_dsn=target, db_timeout_s=0.5) as api:
            for method, path, headers, body in (
                ("GET", "/health", {}, None),
                ("GET", "/health?db=1", {}, None),
                ("GET", "/ready", {}, None),
                ("GET", "/info", {}, None),
                ("GET", "/openapi.json", {}, None),
                ("GET", "/docs", {}, None),
                ("GET", "/api/v1/jobs", READ, None),
                ("GET", "/api/v1/jobs", bearer(OPERATOR_TOKEN + "x"), None),
                ("POST", "/api/v1/jobs", PRODUCER, {"task": "t", "args": {"password": "p"}}),
                ("POST", "/api/v1/jobs", PRODUCER, {"task": "t", "priority": "high"}),
                ("GET", "/api/v1/queues", OPERATOR, None),
                ("GET", "/api/v1/workers", OPERATOR, None),
                ("GET", "/api/v1/schedules", OPERATOR, None),
                ("POST", "/api/v1/jobs/1/cancel", OPERATOR, None),
                ("GET", "/nowhere", OPERATOR, None),
            ):
                r = api.request(method, path, headers=headers, json=body)
                assert r.status_code < 500 or r.status_code == 503, (path, r.status_code, r.text)
                bodies.append(f"{path} {r.status_code} {dict(r.headers)} {r.text}")
    assert any(" 503 " in b for b in bodies), "the outage half never answered 503"
    for text in [*bodies, caplog.text]:
        for secret in secrets:
            assert secret not in text, f"secret {secret[:4]}... leaked: {text[:300]}"


def test_settings_repr_hides_secrets() -> None:
    settings = WebSettings(dsn="host=x password=hunter2-secret", tokens={"t" * 20: Scope.READ})
    assert "hunter2" not in repr(settings) and "t" * 20 not in repr(settings)


def test_an_unexpected_error_is_a_500_problem_without_a_traceback(dsn: str) -> None:
    with web_client(dsn) as api:

        @api.app.get("/test-only/boom")  # type: ignore[attr-defined]
        def boom() -> None:
            raise RuntimeError("internal detail password=hunter2")

        body = is_problem(api.get("/test-only/boom"), 500)
        assert "RuntimeError" in body["detail"] and "hunter2" not in body["detail"]


def test_the_monitor_role_reads_schedules_and_workflows(
    dsn: str, role_dsns: dict[str, str]
) -> None:
    """With the monitor-role read DSN, read-scope listings of schedules and workflows work."""
    with web_client(dsn, read_dsn=role_dsns["monitor"]) as api:
        assert api.get("/api/v1/schedules", headers=READ).status_code == 200
        assert api.get("/api/v1/workflows", headers=READ).status_code == 200
        assert api.get("/api/v1/schedules", headers=OPERATOR).status_code == 200


def test_an_oversize_body_is_413_before_it_is_read(dsn: str, conn) -> None:
    from queue_engine.web.limits import MAX_BODY_BYTES

    with web_client(dsn) as api:
        huge = b'{"task": "t", "args": {"x": "' + b"a" * MAX_BODY_BYTES + b'"}}'
        announced = api.post(
            "/api/v1/jobs", content=huge, headers={**PRODUCER, "content-type": "application/json"}
        )
        assert "request body over" in is_problem(announced, 413)["detail"]

        def chunks():  # no Content-Length: counted as it arrives
            yield b'{"task": "t", "args": {"x": "'
            for _ in range(MAX_BODY_BYTES // (1024 * 1024) + 1):
                yield b"a" * (1024 * 1024)
            yield b'"}}'

        chunked = api.post(
            "/api/v1/jobs",
            content=chunks(),
            headers={**PRODUCER, "content-type": "application/json"},
        )
        assert is_problem(chunked, 413)
    assert job_count(conn) == 0
