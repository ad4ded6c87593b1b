"""The jobs list and the job page show a job as what it is, in-process against a real Postgres.

A delayed job reads ``scheduled`` with its run time, a workflow input node
reads as an input of its workflow (never as the pseudo-task
``queue-engine:input``), a running job's progress document is drawn as a bar
with its JSON beside it, and a failed job's error shows what was raised above
its traceback. Display only: the JSON API still answers the stored status.
The browser tests (tests/browser) check how the same pages look.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import psycopg
from support.web import READ, web_client

from queue_engine import Client
from queue_engine.producer.workflows import Workflow

S = "queue_engine"
REX = {"Authorization": "Basic " + base64.b64encode(b"rex:rex-password-42").decode()}


def row_of(html: str, job_id: int) -> str:
    """The jobs list's row of one job."""
    found = re.search(rf'<tr data-job="{job_id}".*?</tr>', html, re.S)
    assert found, f"no row for job {job_id}"
    return found.group(0)


def run_with_progress(conn: psycopg.Connection[Any], job_id: int, progress: Any) -> None:
    """Make a queued job running with a progress document, as a worker's claim and beat would."""
    conn.execute(
        f"UPDATE {S}.jobs SET status = 'running', attempt = 1, started_at = now(),"
        " claimed_by = 'host:1:test', lease_expires_at = now() + interval '1 minute',"
        " progress = %s WHERE id = %s",
        (None if progress is None else json.dumps(progress), job_id),
    )


def test_a_delayed_job_reads_as_scheduled_and_the_api_keeps_its_status(
    dsn: str, client: Client
) -> None:
    delayed = client.enqueue("report.build", queue="pages", delay=600).id
    ready = client.enqueue("report.build", queue="pages").id
    with web_client(dsn) as web:
        listing = web.get("/jobs", headers=REX).text
        row = row_of(listing, delayed)
        assert 'data-status="scheduled"' in row and '<span class="badge scheduled">' in row
        assert re.search(r">in 9m5\ds<", row), row
        assert 'data-status="queued"' in row_of(listing, ready)
        page = web.get(f"/jobs/{delayed}", headers=REX).text
        assert re.search(
            r'id="job-status">scheduled</span> <span id="job-runs">runs in 9m5\ds', page
        )
        assert web.get(f"/api/v1/jobs/{delayed}", headers=READ).json()["status"] == "queued"


def test_an_input_node_reads_as_an_input_of_its_workflow(dsn: str, client: Client) -> None:
    wf = Workflow("approval")
    wf.add("draft", "doc.draft")
    wf.input("approve")
    wf.input("sign", after=["draft"])
    info = client.start_workflow(wf)
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    with web_client(dsn) as web:
        listing = web.get("/jobs", headers=REX).text
        assert "queue-engine:input" not in listing
        approve = row_of(listing, nodes["approve"].job_id)
        assert 'data-status="awaiting input"' in approve
        assert '<span class="input-tag">input</span> <span class="mono">approve</span>' in approve
        assert f'href="/workflows/{info.id}">workflow {info.id}</a>' in approve
        # Its parent not done yet: an input node that is not ready is just waiting.
        assert 'data-status="waiting"' in row_of(listing, nodes["sign"].job_id)
        # Any other node of a workflow links to it too.
        assert f'href="/workflows/{info.id}"' in row_of(listing, nodes["draft"].job_id)
        page = web.get(f"/jobs/{nodes['approve'].job_id}", headers=REX).text
        assert "queue-engine:input" not in page
        assert '<h1>Input <span class="mono">approve</span>' in page
        assert 'id="job-status">awaiting input</span>' in page
        assert f'href="/workflows/{info.id}#inputs" id="job-provide"' in page
        assert f"queue-ctl workflows provide-input {info.id} approve VALUE" in page
        # The filter a folded group links to: one workflow's nodes.
        only = web.get(f"/jobs?workflow={info.id}&task=doc.draft", headers=REX).text
        assert re.findall(r'<tr data-job="(\d+)"', only) == [str(nodes["draft"].job_id)]
        bad = web.get("/jobs?workflow=99999999999999999999", headers=REX)
        assert bad.status_code == 200 and "workflow: not a workflow id" in bad.text


def test_progress_is_drawn_as_a_bar_with_its_json_beside_it(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    job = client.enqueue("etl.load", queue="pages").id
    run_with_progress(conn, job, {"step": 3, "of": 12, "message": "loading rows"})
    with web_client(dsn) as web:
        page = web.get(f"/jobs/{job}", headers=REX).text
        assert 'role="progressbar"' in page and 'aria-valuenow="25"' in page
        assert "width: 25.0%" in page
        assert '<span class="progress-label">3 of 12 · 25%</span>' in page
        assert '<div class="progress-note">loading rows</div>' in page
        assert (
            "{&#34;message&#34;: &#34;loading rows&#34;, &#34;of&#34;: 12, &#34;step&#34;: 3}"
            in page
        )
        row = row_of(web.get("/jobs", headers=REX).text, job)
        assert 'class="minibar"' in row and "width: 25.0%" in row and ">25%<" in row


def test_a_failed_jobs_page_names_what_was_raised_above_the_traceback(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    job = client.enqueue("etl.load", queue="pages").id
    run_with_progress(conn, job, None)
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "app/loader.py", line 88, in load\n'
        "    rows = fetch(url)\n"
        "ValueError: " + "the export at https://example.com/exports/2026-11-23 " * 8
    )
    conn.execute(
        f"UPDATE {S}.jobs SET status = 'failed', attempt = 1, error = %s, finished_at = now()"
        " WHERE id = %s",
        (traceback, job),
    )
    with web_client(dsn) as web:
        page = web.get(f"/jobs/{job}", headers=REX).text
        listed = row_of(web.get("/jobs?status=failed", headers=REX).text, job)
    # The list says what was raised under the job's arguments.
    said = re.search(r'<div class="row-error" title="([^"]*)">', listed)
    assert said and said.group(1).startswith("ValueError: the export at https://example.com/")
    summary = re.search(r'<p class="error-summary" id="job-error-summary">([^<]*)</p>', page)
    assert summary and summary.group(1).startswith("ValueError: the export at")
    assert 'id="job-error">Traceback (most recent call last):' in page
