"""queue-web with its database down, then back: 503 problems, never a traceback; /health stays up."""

from __future__ import annotations

from psycopg.conninfo import make_conninfo
from support.web import OPERATOR, PRODUCER, READ, is_problem, web_client

from queue_engine.foundation.version import __version__
from queue_engine.testing.databases import TestServer


def test_database_down_answers_503_and_health_stays_200(dsn: str) -> None:
    unreachable = make_conninfo(dsn, host="127.0.0.1", port="1")
    with web_client(unreachable, db_timeout_s=0.5) as api:
        assert api.get("/health").json() == {"status": "ok"}
        for method, path, headers in (
            ("GET", "/ready", {}),
            ("GET", "/health?db=1", {}),
            ("GET", "/api/v1/jobs", READ),
            ("GET", "/api/v1/jobs/1", READ),
            ("POST", "/api/v1/jobs", PRODUCER),
            ("GET", "/api/v1/queues", READ),
            ("POST", "/api/v1/queues/q/pause", OPERATOR),
        ):
            body = {"task": "t"} if method == "POST" else None
            r = api.request(method, path, headers=headers, json=body)
            problem = is_problem(r, 503)
            assert r.headers["retry-after"]
            assert "database" in problem["detail"]
        info = api.get("/info").json()
        assert info["schema_version"] is None and info["uptime_s"] >= 0
        assert info["version"] == __version__ == api.get("/openapi.json").json()["info"]["version"]


def test_unmigrated_database_is_not_ready(empty_dsn: str) -> None:
    with web_client(empty_dsn) as api:
        r = api.get("/ready")
        assert r.status_code == 503
        assert "queue-ctl migrate" in r.json()["detail"]
        assert (
            "queue-ctl migrate" in is_problem(api.get("/api/v1/jobs", headers=READ), 503)["detail"]
        )


def test_ready_when_migrated(dsn: str) -> None:
    with web_client(dsn) as api:
        r = api.get("/ready")
        assert r.status_code == 200
        assert (
            r.json()["status"] == "ok" and r.json()["schema_version"] == r.json()["schema_required"]
        )
        assert api.get("/health", params={"db": 1}).json()["database"] == "ok"


def test_database_restart_mid_life_is_503_then_recovers(pg_server: TestServer, dsn: str) -> None:
    """Sessions killed under the pool (a failover, a restart): one 503 at most, then service again."""
    import psycopg

    with web_client(dsn) as api:
        assert api.get("/api/v1/jobs", headers=READ).status_code == 200
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'queue-engine-web'"
            )
        statuses = [api.get("/api/v1/jobs", headers=READ).status_code for _ in range(3)]
        assert set(statuses) <= {200, 503} and statuses[-1] == 200, statuses
