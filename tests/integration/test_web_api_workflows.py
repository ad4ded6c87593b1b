"""``/api/v1/workflows`` against a real Postgres: start, idempotency, read, list, cancel, retry, input."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from support.web import OPERATOR, PRODUCER, READ, is_problem, web_client

from queue_engine import Client

BASE = "/api/v1/workflows"


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn) as c:
        yield c


def counts(dsn: str) -> tuple[int, int]:
    """(workflows, jobs) rows in the database."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM queue_engine.workflows),"
            " (SELECT count(*) FROM queue_engine.jobs)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def etl(name: str = "etl", **extra: Any) -> dict[str, Any]:
    """A fetch → 3 parts → merge workflow, with one input node after merge."""
    return {
        "name": name,
        "nodes": [
            {"node": "fetch", "task": "etl.fetch", "args": {"day": "2026-11-23"}, "priority": 5},
            *(
                {"node": f"part-{i}", "task": "etl.part", "after": ["fetch"], "queue": "parts"}
                for i in range(3)
            ),
            {
                "node": "merge",
                "task": "etl.merge",
                "after": [{"node": f"part-{i}", "requires": "finished"} for i in range(3)],
                "max_attempts": 5,
            },
            {"node": "approve", "input": True, "after": ["merge"], "timeout_s": 3600},
        ],
        **extra,
    }


def start(api: TestClient, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    r = api.post(BASE, json=body, headers={**PRODUCER, **headers})
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def test_start_answers_201_with_counts_and_the_nodes_reach_the_rows(
    api: TestClient, client: Client
) -> None:
    r = api.post(BASE, json=etl(), headers=PRODUCER)
    assert r.status_code == 201, r.text
    wf = r.json()
    assert wf["name"] == "etl" and wf["state"] == "running" and wf["node_count"] == 6
    assert wf["counts"]["unfinished"] == 6
    assert r.headers["location"] == f"{BASE}/{wf['id']}"
    got = api.get(r.headers["location"], headers=READ)
    assert got.status_code == 200 and got.json()["id"] == wf["id"]
    nodes = api.get(f"{BASE}/{wf['id']}/nodes", headers=READ)
    assert nodes.status_code == 200, nodes.text
    by_name = {n["node"]: n for n in nodes.json()["items"]}
    assert next(iter(by_name)) == "fetch" and set(by_name) == {
        "fetch",
        "part-0",
        "part-1",
        "part-2",
        "merge",
        "approve",
    }
    assert by_name["merge"]["after"][0] == {"node": "part-0", "requires": "finished"}
    # The same rows the Python client reads: one code path.
    py = {n.node: n for n in client.workflow_nodes(wf["id"])}
    assert py["part-1"].queue == "parts" and py["merge"].max_attempts == 5
    assert client.get(py["fetch"].job_id).priority == 5
    assert client.get(py["fetch"].job_id).args == {"day": "2026-11-23"}


def test_an_idempotency_key_returns_the_same_workflow_with_200(api: TestClient, dsn: str) -> None:
    first = api.post(BASE, json=etl(), headers={**PRODUCER, "Idempotency-Key": "nightly:1"})
    assert first.status_code == 201, first.text
    again = api.post(BASE, json=etl(), headers={**PRODUCER, "Idempotency-Key": "nightly:1"})
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["idempotency_key"] == "nightly:1"
    # The body's key works the same way.
    body = api.post(BASE, json=etl(idempotency_key="nightly:1"), headers=PRODUCER)
    assert body.status_code == 200 and body.json()["id"] == first.json()["id"]
    assert counts(dsn) == (1, 6)


def test_a_key_reused_for_another_workflow_or_two_keys_are_refused(
    api: TestClient, dsn: str
) -> None:
    start(api, etl(), **{"Idempotency-Key": "k1"})
    other = api.post(BASE, json=etl("other"), headers={**PRODUCER, "Idempotency-Key": "k1"})
    assert "already used by workflow" in is_problem(other, 422)["detail"]
    both = api.post(
        BASE, json=etl(idempotency_key="k2"), headers={**PRODUCER, "Idempotency-Key": "k3"}
    )
    assert "differ" in is_problem(both, 422)["detail"]
    assert counts(dsn) == (1, 6)


@pytest.mark.parametrize(
    ("nodes", "says"),
    [
        ([{"node": "a", "task": "t"}, {"node": "a", "task": "t"}], "node a: a node of that name"),
        ([{"node": "a", "task": "t", "after": ["ghost"]}], "node a: after names ghost"),
        (
            [
                {"node": "a", "task": "t", "after": ["b"]},
                {"node": "b", "task": "t", "after": ["a"]},
            ],
            "has a cycle",
        ),
        ([{"node": "a", "task": "t", "priority": -4}], "nodes[0].priority: "),
        ([{"node": "a"}], "node a: 'task' is required"),
        ([{"node": "a", "input": True, "task": "t"}], "node a: an input node takes only"),
        ([{"node": "a", "task": "t", "dedupe_key": "d"}], "node a: a node cannot carry dedupe_key"),
        ([{"node": "bad name", "task": "t"}], "invalid node name 'bad name'"),
        (
            [
                {"node": "a", "task": "t"},
                {
                    "node": "b",
                    "task": "t",
                    "after": ["a"],
                    "skip_if": {"$eq": [{"$result": "z"}, 1]},
                },
            ],
            "node b: skip_if.$eq[0]: z is not a parent of this node (parents: a)",
        ),
        (
            [{"node": "a", "input": True, "skip_if": {"$eq": [1, 1]}}],
            "node a: an input node takes only after, timeout_s and queue, not skip_if",
        ),
    ],
)
def test_a_bad_shape_is_a_422_naming_the_node_and_writes_nothing(
    api: TestClient, dsn: str, nodes: list[dict[str, Any]], says: str
) -> None:
    r = api.post(BASE, json={"name": "bad", "nodes": nodes}, headers=PRODUCER)
    body = is_problem(r, 422)
    assert says in body["detail"], body
    assert counts(dsn) == (0, 0)


def test_a_node_declares_skip_if_and_it_reaches_the_args(api: TestClient, client: Client) -> None:
    predicate = {"$eq": [{"$result": "fetch", "path": ["count"]}, 0]}
    nodes = [
        {"node": "fetch", "task": "etl.fetch"},
        {
            "node": "load",
            "task": "etl.load",
            "after": ["fetch"],
            "args": {"n": 1},
            "skip_if": predicate,
        },
    ]
    wf = start(api, {"name": "skippy", "nodes": nodes})
    load = next(n for n in client.workflow_nodes(wf["id"]) if n.node == "load")
    job = client.get(load.job_id)
    assert job.args == {"n": 1, "$skip_if": predicate}


def test_unknown_fields_and_bad_types_are_422_naming_the_field(api: TestClient, dsn: str) -> None:
    typo = api.post(
        BASE,
        json={"name": "x", "nodes": [{"node": "a", "task": "t", "prioirty": 1}]},
        headers=PRODUCER,
    )
    assert is_problem(typo, 422)["errors"][0]["field"] == "nodes[0].prioirty"
    empty = api.post(BASE, json={"name": "x", "nodes": []}, headers=PRODUCER)
    assert is_problem(empty, 422)["errors"][0]["field"] == "nodes"
    edge = api.post(
        BASE,
        json={
            "name": "x",
            "nodes": [{"node": "a", "task": "t", "after": [{"node": "b", "requires": "maybe"}]}],
        },
        headers=PRODUCER,
    )
    is_problem(edge, 422)
    assert counts(dsn) == (0, 0)


def test_scopes_read_for_reads_producer_to_start_operator_to_act(api: TestClient) -> None:
    wf = start(api, etl())
    assert is_problem(api.post(BASE, json=etl(), headers=READ), 403)
    assert api.post(BASE, json=etl("byop"), headers=OPERATOR).status_code == 201
    assert api.get(BASE).status_code == 401
    for path in ("cancel", "retry"):
        is_problem(api.post(f"{BASE}/{wf['id']}/{path}", headers=READ), 403)
        is_problem(api.post(f"{BASE}/{wf['id']}/{path}", headers=PRODUCER), 403)
    is_problem(
        api.post(f"{BASE}/{wf['id']}/provide-input", json={"node": "approve"}, headers=PRODUCER),
        403,
    )
    assert api.get(f"{BASE}/{wf['id']}", headers=READ).status_code == 200


def test_a_read_only_server_refuses_a_start(dsn: str) -> None:
    with web_client(dsn, read_only=True) as api:
        is_problem(api.post(BASE, json=etl(), headers=OPERATOR), 403)
    assert counts(dsn) == (0, 0)


def test_unknown_workflows_and_nodes_are_404(api: TestClient) -> None:
    is_problem(api.get(f"{BASE}/999", headers=READ), 404)
    is_problem(api.get(f"{BASE}/999/nodes", headers=READ), 404)
    is_problem(api.post(f"{BASE}/999/cancel", headers=OPERATOR), 404)
    is_problem(api.post(f"{BASE}/999/retry", headers=OPERATOR), 404)
    wf = start(api, etl())
    missing = api.post(
        f"{BASE}/{wf['id']}/provide-input", json={"node": "nope", "value": 1}, headers=OPERATOR
    )
    assert "node nope" in is_problem(missing, 404)["detail"]
    is_problem(api.get(f"{BASE}/0", headers=READ), 422)


def test_list_is_newest_first_filtered_and_keyset_paged(api: TestClient) -> None:
    ids = [start(api, etl("a" if i % 2 else "b"))["id"] for i in range(5)]
    page = api.get(BASE, params={"limit": 2}, headers=READ).json()
    assert [w["id"] for w in page["items"]] == ids[::-1][:2]
    assert page["next_before_id"] == ids[3]
    seen = [w["id"] for w in page["items"]]
    while page["next_before_id"]:
        page = api.get(
            BASE, params={"limit": 2, "before_id": page["next_before_id"]}, headers=READ
        ).json()
        seen += [w["id"] for w in page["items"]]
    assert seen == ids[::-1]
    named = api.get(BASE, params={"name": "a"}, headers=READ).json()
    assert [w["id"] for w in named["items"]] == [ids[3], ids[1]]
    assert named["next_before_id"] is None
    api.post(f"{BASE}/{ids[0]}/cancel", headers=OPERATOR)
    canceled = api.get(BASE, params={"state": "canceled"}, headers=READ).json()
    assert [w["id"] for w in canceled["items"]] == [ids[0]]
    assert canceled["items"][0]["counts"]["canceled"] == 6
    is_problem(api.get(BASE, params={"state": "sleeping"}, headers=READ), 422)
    is_problem(api.get(BASE, params={"limit": 1001}, headers=READ), 422)
    at_cap = api.get(BASE, params={"limit": 1000}, headers=READ).json()
    assert len(at_cap["items"]) == 5 and at_cap["next_before_id"] is None


def test_cancel_then_cancel_again_is_409_and_retry_reruns(api: TestClient) -> None:
    wf = start(api, etl())
    r = api.post(f"{BASE}/{wf['id']}/cancel", headers=OPERATOR)
    assert r.status_code == 200, r.text
    assert r.json() == {"workflow_id": wf["id"], "canceled": 6, "stopping": 0}
    assert api.get(f"{BASE}/{wf['id']}", headers=READ).json()["state"] == "canceled"
    assert (
        "already ended"
        in is_problem(api.post(f"{BASE}/{wf['id']}/cancel", headers=OPERATOR), 409)["detail"]
    )
    retried = api.post(f"{BASE}/{wf['id']}/retry", headers=OPERATOR)
    assert retried.status_code == 200, retried.text
    assert retried.json() == {"workflow_id": wf["id"], "rerun": 6}
    assert api.get(f"{BASE}/{wf['id']}", headers=READ).json()["state"] == "running"
    assert (
        "still running"
        in is_problem(api.post(f"{BASE}/{wf['id']}/retry", headers=OPERATOR), 409)["detail"]
    )


def test_provide_input_then_again_answers_already(api: TestClient, client: Client) -> None:
    wf = start(
        api,
        {
            "name": "gate",
            "nodes": [{"node": "ok", "input": True}, {"node": "go", "task": "t", "after": ["ok"]}],
        },
    )
    path = f"{BASE}/{wf['id']}/provide-input"
    first = api.post(path, json={"node": "ok", "value": {"by": "ana"}}, headers=OPERATOR)
    assert first.status_code == 200, first.text
    assert first.json() == {
        "workflow_id": wf["id"],
        "node": "ok",
        "provided": True,
        "already": False,
    }
    again = api.post(path, json={"node": "ok", "value": {"by": "bob"}}, headers=OPERATOR)
    assert again.status_code == 200 and again.json()["already"] is True
    nodes = {n.node: n for n in client.workflow_nodes(wf["id"])}
    assert nodes["ok"].status == "succeeded" and nodes["ok"].result == {"by": "ana"}
    assert (
        "not an input node"
        in is_problem(api.post(path, json={"node": "go", "value": 1}, headers=OPERATOR), 409)[
            "detail"
        ]
    )


def test_an_input_not_ready_yet_is_409(api: TestClient) -> None:
    wf = start(api, etl())
    r = api.post(
        f"{BASE}/{wf['id']}/provide-input", json={"node": "approve", "value": 1}, headers=OPERATOR
    )
    assert "not awaiting input yet" in is_problem(r, 409)["detail"]
