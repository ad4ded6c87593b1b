"""The audit of controls (migration 0034), against a real Postgres.

Every control of the operator layer writes exactly one ``control_events``
row in its own transaction (right before/after/actor/via), a refused or
rolled-back control writes none; ``queue-ctl audit`` and ``GET
/api/v1/audit`` read them with filters; bad filters are one line / a 422
problem; the pruner deletes rows past their retention.
"""

from __future__ import annotations

import getpass
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from support.audit import audit_rows
from support.ctl import ok, queue_ctl
from support.web import OPERATOR, READ, basic, is_problem, web_client

from queue_engine.foundation.errors import ValidationError
from queue_engine.operator import audit
from queue_engine.operator.audit import Actor, list_control_events, local_actor
from queue_engine.operator.controls import (
    FleetTarget,
    NoLiveWorker,
    park,
    pause_queue,
    rate_queue,
    resume_queue,
    scale_queue,
    stop_workers,
    unpark,
)
from queue_engine.operator.limits import clear_limit, clear_rate, set_limit, set_rate
from queue_engine.operator.partitions import clear_weight, set_weight
from queue_engine.orchestrator.pruner import Retention, prune_dry_run, prune_once

S = "queue_engine"
OPS = Actor("ops-lead", "library")


def add_worker(conn: psycopg.Connection[Any], wid: str, host: str = "gpu-1") -> None:
    conn.execute(
        "INSERT INTO queue_engine.workers (id, role, queue, host, pid, state) "
        "VALUES (%s, 'worker', 'infer', %s, 4242, 'idle')",
        (wid, host),
    )


def test_each_control_writes_one_row_with_its_before_and_after(
    conn: psycopg.Connection[Any],
) -> None:
    add_worker(conn, "w-1")
    pause_queue(conn, S, "infer", by=OPS)
    pause_queue(conn, S, "infer", by=OPS)  # again: a row all the same, before says it was
    resume_queue(conn, S, "infer", by=OPS)
    scale_queue(conn, S, "infer", 3, by=OPS)
    scale_queue(conn, S, "infer", "off", by=OPS)
    rate_queue(conn, S, "infer", 2.5, burst=5, by=OPS)
    park(conn, S, FleetTarget(host="gpu-1", queue="infer"), by=OPS)
    unpark(conn, S, FleetTarget(host="gpu-1"), by=OPS)
    park(conn, S, FleetTarget(worker_id="w-1"), by=OPS)
    unpark(conn, S, FleetTarget(worker_id="w-1"), by=OPS)
    stop_workers(conn, S, FleetTarget(worker_id="w-1"), by=OPS)
    stop_workers(conn, S, FleetTarget(host="gpu-1"), now=True, by=OPS)
    set_limit(conn, S, "src:erp", 3, by=OPS)
    set_limit(conn, S, "src:erp", 0, by=OPS)
    clear_limit(conn, S, "src:erp", by=OPS)
    set_rate(conn, S, "partner:acme", "10/s", 20, by=OPS)
    set_rate(conn, S, "partner:acme", "30/min", None, by=OPS)
    clear_rate(conn, S, "partner:acme", by=OPS)
    assert clear_rate(conn, S, "partner:acme", by=OPS) is None  # nothing to clear: no row
    set_weight(conn, S, "reports", "customer:42", 3, by=OPS)
    clear_weight(conn, S, "reports", "customer:42", by=OPS)
    assert clear_weight(conn, S, "reports", "customer:42", by=OPS) is None
    rows = audit_rows(conn)
    assert {(r[4], r[5]) for r in rows} == {("ops-lead", "library")}
    assert [r[:4] for r in rows] == [
        ("pause", "infer", {"paused": False}, {"paused": True}),
        ("pause", "infer", {"paused": True}, {"paused": True}),
        ("resume", "infer", {"paused": True}, {"paused": False}),
        ("scale", "infer", {"scale_limit": None}, {"scale_limit": 3}),
        ("scale", "infer", {"scale_limit": 3}, {"scale_limit": None}),
        (
            "rate",
            "infer",
            {"rate_limit": None, "rate_burst": None},
            {"rate_limit": 2.5, "rate_burst": 5},
        ),
        (
            "park",
            "gpu-1",
            {"parked": False, "queue": "infer"},
            {"parked": True, "queue": "infer", "workers": ["w-1"]},
        ),
        ("unpark", "gpu-1", {"parks": ["infer"]}, {"parks": []}),
        (
            "park",
            "w-1",
            {"parked": False, "queue": None},
            {"parked": True, "queue": None, "workers": ["w-1"]},
        ),
        ("unpark", "w-1", {"parks": ["*"]}, {"parks": []}),
        ("stop", "w-1", {"asked": []}, {"workers": ["w-1"], "queue": None, "now": False}),
        ("stop", "gpu-1", {"asked": ["w-1"]}, {"workers": ["w-1"], "queue": None, "now": True}),
        ("limit_set", "src:erp", None, {"max_running": 3}),
        ("limit_set", "src:erp", {"max_running": 3}, {"max_running": 0}),
        ("limit_clear", "src:erp", {"max_running": 0}, None),
        ("key_rate_set", "partner:acme", None, {"rate": 10.0, "burst": 20}),
        (
            "key_rate_set",
            "partner:acme",
            {"rate": 10.0, "burst": 20},
            {"rate": 0.5, "burst": 1},
        ),
        ("key_rate_clear", "partner:acme", {"rate": 0.5, "burst": 1}, None),
        ("partition_weight_set", "reports/customer:42", None, {"weight": 3.0}),
        ("partition_weight_clear", "reports/customer:42", {"weight": 3.0}, None),
    ]
    assert set(r[0] for r in rows) == set(audit.CONTROLS)  # the vocabulary is complete


def test_a_refused_or_rolled_back_control_writes_nothing(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(NoLiveWorker):
        park(conn, S, FleetTarget(worker_id="nobody"), by=OPS)
    with pytest.raises(NoLiveWorker):
        unpark(conn, S, FleetTarget(worker_id="nobody"), by=OPS)
    with pytest.raises(NoLiveWorker):
        stop_workers(conn, S, FleetTarget(host="no-such-host"), by=OPS)
    with pytest.raises(ValidationError):
        scale_queue(conn, S, "infer", -1, by=OPS)
    assert clear_limit(conn, S, "never-set", by=OPS) is None  # nothing changed: no row
    # The caller's transaction rolls back: the control and its row go together.
    with pytest.raises(RuntimeError), conn.transaction():
        pause_queue(conn, S, "infer", by=OPS)
        raise RuntimeError("the caller changes its mind")
    assert audit_rows(conn) == []
    # The audit row fails: the control fails with it (same transaction).
    conn.execute(
        "CREATE FUNCTION queue_engine.refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN RAISE EXCEPTION 'refused'; END$$"
    )
    conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON queue_engine.control_events "
        "FOR EACH ROW EXECUTE FUNCTION queue_engine.refuse()"
    )
    with pytest.raises(psycopg.errors.RaiseException):
        set_limit(conn, S, "k", 2, by=OPS)
    assert conn.execute("SELECT count(*) FROM queue_engine.concurrency_limits").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM queue_engine.queues").fetchone() == (0,)


def test_the_local_actor_is_the_setting_else_user_at_host(monkeypatch) -> None:
    monkeypatch.delenv("QUEUE_ENGINE_ACTOR", raising=False)
    assert local_actor("cli") == Actor(f"{getpass.getuser()}@{socket.gethostname()}", "cli")
    monkeypatch.setenv("QUEUE_ENGINE_ACTOR", "alice (incident 42)")
    assert local_actor() == Actor("alice (incident 42)", "library")


def test_queue_ctl_writes_its_actor_and_reads_the_audit_with_filters(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ok(queue_ctl("--dsn", dsn, "pause", "etl", env={"QUEUE_ENGINE_ACTOR": "alice"}))
    ok(queue_ctl("--dsn", dsn, "limits", "set", "src:erp", "2"))
    ok(queue_ctl("--dsn", dsn, "scale", "etl", "4", env={"QUEUE_ENGINE_ACTOR": "bob"}))
    me = f"{getpass.getuser()}@{socket.gethostname()}"
    assert [(r[0], r[1], r[4], r[5]) for r in audit_rows(conn)] == [
        ("pause", "etl", "alice", "cli"),
        ("limit_set", "src:erp", me, "cli"),
        ("scale", "etl", "bob", "cli"),
    ]
    listed = json.loads(ok(queue_ctl("--dsn", dsn, "audit", "--json")))
    assert [e["control"] for e in listed] == ["scale", "limit_set", "pause"]  # newest first
    etl = json.loads(ok(queue_ctl("--dsn", dsn, "audit", "--target", "etl", "--json")))
    assert [(e["control"], e["actor"]) for e in etl] == [("scale", "bob"), ("pause", "alice")]
    one = json.loads(ok(queue_ctl("--dsn", dsn, "audit", "--control", "pause", "--json")))
    assert [(e["before"], e["after"]) for e in one] == [({"paused": False}, {"paused": True})]
    assert len(json.loads(ok(queue_ctl("--dsn", dsn, "audit", "--limit", "1", "--json")))) == 1
    recent = ok(queue_ctl("--dsn", dsn, "audit", "--since", "1h")).splitlines()
    assert recent[0].split() == ["AT", "CONTROL", "TARGET", "BEFORE", "AFTER", "ACTOR", "VIA"]
    assert recent[1].split()[1:4] == ["scale", "etl", "scale_limit=null"]
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    out = ok(queue_ctl("--dsn", dsn, "audit", "--since", future))
    assert out.strip() == "no control changes recorded matching these filters"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "yesterday"), "invalid --since 'yesterday'"),
        (("--limit", "0"), "invalid limit 0"),
        (("--control", "Pause!"), "invalid control 'Pause!'"),
    ],
)
def test_queue_ctl_audit_refuses_bad_filters_in_one_line(
    args: tuple[str, ...], message: str
) -> None:
    # No database: the filters are checked before connecting.
    result = queue_ctl("--dsn", "host=/nonexistent dbname=x", "audit", *args)
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn) as c:
        yield c


def test_api_controls_name_the_principal_and_the_audit_reads_with_filters(
    api: TestClient, conn: psycopg.Connection[Any]
) -> None:
    assert api.post("/api/v1/queues/etl/pause", headers=OPERATOR).status_code == 200
    assert (
        api.put("/api/v1/limits/k1", json={"max_running": 1}, headers=OPERATOR).status_code == 200
    )
    assert api.post("/api/v1/queues/etl/resume", headers=OPERATOR).status_code == 200
    assert [(r[0], r[4], r[5]) for r in audit_rows(conn)] == [
        ("pause", "token:operator", "api"),
        ("limit_set", "token:operator", "api"),
        ("resume", "token:operator", "api"),
    ]
    everything = api.get("/api/v1/audit", headers=READ)
    assert everything.status_code == 200
    events = everything.json()["events"]
    assert [e["control"] for e in events] == ["resume", "limit_set", "pause"]
    assert set(events[0]) == {"id", "at", "control", "target", "before", "after", "actor", "via"}
    only = api.get("/api/v1/audit?target=etl&control=pause&since=10m&limit=5", headers=READ)
    assert [e["control"] for e in only.json()["events"]] == ["pause"]
    assert api.get("/api/v1/audit?since=2999-01-01T00:00:00Z", headers=READ).json() == {
        "events": []
    }
    for bad in ("since=soon", "limit=0", "limit=1001", "control=Pause", "since=9999999999999w"):
        assert is_problem(api.get(f"/api/v1/audit?{bad}", headers=READ), 422)
    assert is_problem(api.get("/api/v1/audit"), 401)


def test_the_pruner_deletes_audit_rows_past_their_retention(conn: psycopg.Connection[Any]) -> None:
    for days in (100, 91, 10):
        conn.execute(
            "INSERT INTO queue_engine.control_events (at, control, target, actor, via) "
            "VALUES (now() - make_interval(days => %s), 'pause', %s, 'a', 'sql')",
            (days, f"q{days}"),
        )
    assert prune_dry_run(conn, S, Retention()).control_events == 2
    assert prune_once(conn, S, Retention(control_events_s=0)).control_events == 0  # 0: keep
    result = prune_once(conn, S, Retention())  # the default: 90 days
    assert result.control_events == 2 and result.did_work
    assert [e.target for e in list_control_events(conn, S)] == ["q10"]


def test_dashboard_controls_name_the_login_and_the_queues_page_lists_them(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    ada = basic("ada", "ada-password-42")  # an operator login
    with web_client(dsn) as web:
        done = web.post("/actions/queues/etl/pause", headers=ada, follow_redirects=False)
        assert done.status_code == 303 and "done=" in done.headers["location"]
        web.post(
            "/actions/queues/etl/scale", headers=ada, data={"limit": "2"}, follow_redirects=False
        )
        refused = web.post(
            "/actions/queues/etl/scale", headers=ada, data={"limit": "-1"}, follow_redirects=False
        )
        assert "failed=" in refused.headers["location"]
        page = web.get("/queues", headers=basic("rex", "rex-password-42")).text
    assert [(r[0], r[4], r[5]) for r in audit_rows(conn)] == [
        ("pause", "ada", "dashboard"),
        ("scale", "ada", "dashboard"),
    ]
    recent = page[page.index('id="recent-changes"') :]
    assert recent.index(">scale<") < recent.index(">pause<")  # newest first
    assert '{"scale_limit": 2}' in recent and "(dashboard)" in recent
