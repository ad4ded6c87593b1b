"""The dashboard's workflow pages in-process against a real Postgres.

The list (state and counts, newest first, keyset pages), one workflow's DAG
by level with folded fan-outs (a 10,000-node workflow stays one box per
group), and the operator's buttons: cancel, retry, provide input. A
read-only visitor sees no control, and a forged cross-site post changes
nothing.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from support.web import basic, web_client

from queue_engine import Client
from queue_engine.producer.workflows import Workflow, WorkflowInfo, finished
from queue_engine.web.pages import graph
from queue_engine.web.pages import workflows as pages
from queue_engine.web.pages.workflows import TIMES

S = "queue_engine"


ADA = basic("ada", "ada-password-42")  # operator
REX = basic("rex", "rex-password-42")  # read-only
FORGED = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}


def posts(html: str) -> list[str]:
    """The actions of the page's forms, but the sign-out's."""
    return [a for a in re.findall(r'method="post" action="([^"]*)"', html) if a != "/logout"]


def fan(client: Client, name: str = "fan", width: int = 5, **kw: Any) -> WorkflowInfo:
    """fetch → part-0 … part-{width-1} → merge (finished), then an input node ``approve``."""
    wf = Workflow(name, **kw)
    wf.add("fetch", "etl.fetch")
    for i in range(width):
        wf.add(f"part-{i}", "etl.part", after=["fetch"])
    wf.add("merge", "etl.merge", after=[finished(f"part-{i}") for i in range(width)])
    wf.input("approve", after=["merge"])
    return client.start_workflow(wf)


def state_of(conn: psycopg.Connection[Any], workflow_id: int) -> str:
    row = conn.execute(f"SELECT state FROM {S}.workflows WHERE id = %s", (workflow_id,)).fetchone()
    assert row is not None
    return str(row[0])


def test_the_pages_answer_and_a_read_only_visitor_gets_no_controls(
    dsn: str, client: Client
) -> None:
    info = fan(client)
    with web_client(dsn) as web:
        for path in ("/workflows", f"/workflows/{info.id}", "/workflows?state=running"):
            as_operator = web.get(path, headers=ADA)
            as_reader = web.get(path, headers=REX)
            assert as_operator.status_code == as_reader.status_code == 200, path
            assert posts(as_reader.text) == [], path
        listing = web.get("/workflows", headers=REX).text
        assert f'href="/workflows/{info.id}"' in listing and 'class="badge running"' in listing
        assert 'href="/workflows"' in listing  # in the navigation
        page = web.get(f"/workflows/{info.id}", headers=ADA).text
        assert posts(page) == [f"/actions/workflows/{info.id}/cancel"]
        assert 'id="cancel-workflow"' in page
        nodes = {n.node: n for n in client.workflow_nodes(info.id)}
        # The fan-out is one box, its ends linked to their jobs; single nodes link to theirs.
        assert "5 nodes" in page
        assert f'href="/jobs/{nodes["part-0"].job_id}"' in page
        assert f'href="/jobs/{nodes["part-4"].job_id}"' in page
        assert f'href="/jobs/{nodes["part-2"].job_id}"' not in page
        assert f'href="/jobs/{nodes["merge"].job_id}"' in page
        # And back: a node's job page names its workflow.
        job_page = web.get(f"/jobs/{nodes['merge'].job_id}", headers=REX).text
        assert f'id="job-workflow" href="/workflows/{info.id}"' in job_page
        assert "after part-0 … part-4 (finished)" in page
        assert page.count('class="dag-level"') == 4
        assert web.get("/workflows/999999", headers=REX).status_code == 404
        for part in ("facts", "dag"):
            live = web.get(f"/fragments/workflows/{info.id}/{part}", headers=REX)
            assert live.status_code == 200 and posts(live.text) == [], part
            assert web.get(f"/fragments/workflows/999999/{part}", headers=REX).status_code == 404
        assert (
            'id="workflow-counts"'
            in web.get(f"/fragments/workflows/{info.id}/facts", headers=REX).text
        )
        assert "5 nodes" in web.get(f"/fragments/workflows/{info.id}/dag", headers=REX).text
        bad = web.get("/workflows?state=sleeping", headers=REX)
        assert bad.status_code == 200 and 'class="banner error"' in bad.text


def test_the_list_is_newest_first_and_pages_by_keyset(
    dsn: str, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "PAGE_SIZE", 2)
    ids = [fan(client, f"w{i}", width=1).id for i in range(5)]
    with web_client(dsn) as web:
        seen: list[int] = []
        path = "/workflows"
        while path:
            html = web.get(path, headers=REX).text
            seen += [
                int(i) for i in re.findall(r'<td class="num"><a href="/workflows/(\d+)"', html)
            ]
            older = re.search(r'id="older" href="([^"]*)"', html)
            path = older.group(1).replace("&amp;", "&") if older else ""
        assert seen == ids[::-1]
        named = web.get("/workflows?name=w3", headers=REX).text
        assert re.findall(r'<td class="num"><a href="/workflows/(\d+)"', named) == [str(ids[3])]


def test_operator_cancel_and_retry_work_and_a_forged_post_changes_nothing(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    info = fan(client)
    with web_client(dsn) as web:
        forged = web.post(f"/actions/workflows/{info.id}/cancel", headers=ADA | FORGED)
        assert forged.status_code == 403
        assert web.post(f"/actions/workflows/{info.id}/cancel", headers=REX).status_code == 403
        assert state_of(conn, info.id) == "running"
        done = web.post(f"/actions/workflows/{info.id}/cancel", headers=ADA, follow_redirects=False)
        assert done.status_code == 303
        assert done.headers["location"].startswith(f"/workflows/{info.id}?done=")
        assert state_of(conn, info.id) == "canceled"
        page = web.get(done.headers["location"], headers=ADA).text
        assert "8 node(s) canceled" in page and 'id="retry-workflow"' in page
        # The page's live parts stop polling once the workflow ended (htmx: 286).
        assert web.get(f"/fragments/workflows/{info.id}/dag", headers=REX).status_code == 286
        again = web.post(f"/actions/workflows/{info.id}/cancel", headers=ADA)
        assert 'class="banner error"' in again.text and "already ended" in again.text
        retried = web.post(f"/actions/workflows/{info.id}/retry", headers=ADA)
        assert "8 node(s) run again" in retried.text
        assert state_of(conn, info.id) == "running"


def test_an_operator_provides_input_from_the_page(dsn: str, client: Client) -> None:
    wf = Workflow("gate")
    wf.input("approve")
    wf.add("go", "t", after=["approve"])
    info = client.start_workflow(wf)
    with web_client(dsn) as web:
        assert 'id="inputs"' not in web.get(f"/workflows/{info.id}", headers=REX).text
        page = web.get(f"/workflows/{info.id}", headers=ADA).text
        assert f"/actions/workflows/{info.id}/provide-input" in posts(page)
        path = f"/actions/workflows/{info.id}/provide-input"
        forged = web.post(path, headers=ADA | FORGED, data={"node": "approve", "value": "1"})
        assert forged.status_code == 403
        bad = web.post(path, headers=ADA, data={"node": "approve", "value": "{nope"})
        assert "not valid JSON" in bad.text
        ok = web.post(path, headers=ADA, data={"node": "approve", "value": '{"by": "ada"}'})
        assert "input approve of workflow" in ok.text and "provided" in ok.text
        again = web.post(path, headers=ADA, data={"node": "approve", "value": "2"})
        assert "provided already" in again.text
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    assert nodes["approve"].status == "succeeded" and nodes["approve"].result == {"by": "ada"}


def test_a_ten_thousand_node_workflow_draws_a_few_boxes(dsn: str, client: Client) -> None:
    info = fan(client, "wide", width=10_000)
    with web_client(dsn) as web:
        page = web.get(f"/workflows/{info.id}", headers=REX)
    assert page.status_code == 200
    assert page.text.count('class="dag-node') == 4  # fetch, the fold, merge, approve
    assert "10 000 nodes" in page.text  # the num filter: thousands separated by a space
    svg = graph_of(page.text)
    assert svg.count('<a class="g-node') == 4 and svg.count('<path class="edge') == 3
    assert 'data-count="10000"' in svg and f"{TIMES}10 000 · etl.part" in svg
    assert len(page.text) < 100_000, len(page.text)


def graph_of(html: str) -> str:
    """The page's SVG drawing of the DAG."""
    found = re.search(r'<svg class="dag-svg".*?</svg>', html, re.S)
    assert found, "no graph on the page"
    return found.group(0)


def test_the_dag_is_drawn_as_a_graph_with_edges_states_and_folds(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    info = fan(client, width=6)
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    conn.execute(
        f"UPDATE {S}.jobs SET status = 'running', attempt = 1, started_at = now(),"
        " claimed_by = 'host:1:t', lease_expires_at = now() + interval '1 minute' WHERE id = %s",
        (nodes["fetch"].job_id,),
    )
    with web_client(dsn) as web:
        svg = graph_of(web.get(f"/workflows/{info.id}", headers=REX).text)
        boxes = re.findall(
            r'<a class="g-node ([\w-]+)( folded)?" href="([^"]*)" data-state="([^"]*)"', svg
        )
        folded_list = web.get(boxes[1][2].replace("&amp;", "&"), headers=REX).text
    assert [(css, state) for css, _, _, state in boxes] == [
        ("running", "running"),  # fetch
        ("waiting", "waiting"),  # the fold of part-0 … part-5
        ("waiting", "waiting"),  # merge
        ("waiting", "waiting"),  # approve: its parent has not ended
    ]
    hrefs = [href.replace("&amp;", "&") for _, _, href, _ in boxes]
    assert hrefs[0] == f"/jobs/{nodes['fetch'].job_id}"
    # The fold links to the list of its nodes, in a search window that starts at its last one.
    assert hrefs[1] == (
        f"/jobs?workflow={info.id}&task=etl.part&before={nodes['part-5'].job_id + 1}"
    )
    assert boxes[1][1] == " folded" and f"{TIMES}6 · etl.part" in svg and "6 waiting" in svg
    edges = re.findall(r'<path class="(edge[\w ]*)" d="M', svg)
    # fetch → fold, fold → merge (after each part finished: dashed), merge → approve.
    assert sorted(edges) == ["edge", "edge", "edge finished"]
    # The fold's link opens exactly its nodes.
    listed = {int(i) for i in re.findall(r'<tr data-job="(\d+)"', folded_list)}
    assert listed == {nodes[f"part-{i}"].job_id for i in range(6)}


def test_a_workflow_too_big_to_draw_is_cut_and_says_so(dsn: str, client: Client) -> None:
    links = graph.MAX_BOXES + 30
    wf = Workflow("long-chain")
    wf.add("step-0", "etl.step")
    for i in range(1, links):
        wf.add(f"step-{i}", "etl.step", after=[f"step-{i - 1}"])
    info = client.start_workflow(wf)
    with web_client(dsn) as web:
        page = web.get(f"/workflows/{info.id}", headers=REX).text
    svg = graph_of(page)
    assert svg.count('<a class="g-node') == graph.MAX_BOXES
    assert page.count('class="dag-node') == graph.MAX_BOXES  # the text view is bounded too
    assert 'id="dag-too-big"' in page and "30 node(s) in 30 more box(es) are not drawn" in page
    assert "folded together" not in page  # a chain has nothing to fold
