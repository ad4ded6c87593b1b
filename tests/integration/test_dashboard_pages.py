"""The dashboard in-process against a real Postgres: its reads, its pages, its buttons.

The browser tests (tests/browser) show the pages live in Chromium; these
check what each page and named statement returns, quickly and without a
browser: filters and the search window, the bulk preview and action, the
login form, a read-only visitor's pages without controls, and that a forged
cross-site post changes nothing.
"""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import pytest
from support.web import basic, web_client

from queue_engine import Client
from queue_engine.web.pages import reads

S = "queue_engine"


ADA = basic("ada", "ada-password-42")  # operator
REX = basic("rex", "rex-password-42")  # read-only


def wait_for_snapshot(client: Any, predicate: Any, timeout: float = 20.0) -> Any:
    """The aggregator's snapshot once ``predicate`` holds (it reads on NOTIFY or its poll)."""
    live = client.app.state.live
    deadline = time.monotonic() + timeout
    while not predicate(live.snapshot):
        assert time.monotonic() < deadline, f"snapshot never matched: {live.snapshot}"
        time.sleep(0.05)
    return live.snapshot


# -- reads ------------------------------------------------------------------------


def test_filters_parse_and_refuse_with_the_field_named() -> None:
    f = reads.JobFilters.parse(
        {"status": "failed", "args": '{"user": 7}', "since": "2026-01-02T03:04"}
    )
    assert (f.status, f.args, f.any) == ("failed", {"user": 7}, True)
    assert f.since is not None and f.since.tzinfo is not None
    assert "status=failed" in f.query and "before" not in f.query
    for form, field in (
        ({"status": "done"}, "status"),
        ({"args": "{nope"}, "arguments"),
        ({"args": "[1]"}, "arguments"),
        ({"since": "yesterday"}, "created after"),
        ({"before": "x"}, "before"),
    ):
        with pytest.raises(reads.FilterError, match=field):
            reads.JobFilters.parse(form)
    assert not reads.JobFilters.parse({"status": "", "queue": " "}).any


def test_list_jobs_filters_and_pages_by_keyset(dsn: str, client: Client) -> None:
    ids = [client.enqueue("t", queue="a" if i % 2 else "b", args={"n": i}).id for i in range(7)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        everything = reads.JobFilters()
        window = reads.search_window(conn, S, everything)
        assert (window.top, window.floor) == (ids[-1] + 1, None)
        page = reads.list_jobs(conn, S, everything, window, limit=3)
        assert [j.id for j in page] == ids[::-1][:3]
        older = reads.JobFilters.parse({"before": str(page[-1].id)})
        page2 = reads.list_jobs(conn, S, older, reads.search_window(conn, S, older), limit=3)
        assert [j.id for j in page2] == ids[::-1][3:6]
        only_a = reads.JobFilters.parse({"queue": "a", "args": '{"n": 3}'})
        found = reads.list_jobs(conn, S, only_a, reads.search_window(conn, S, only_a))
        assert [j.id for j in found] == [ids[3]]


def test_a_filtered_search_reads_one_window_of_ids(dsn: str, client: Client) -> None:
    ids = [client.enqueue("t", args={"n": i}).id for i in range(10)]
    wanted = reads.JobFilters.parse({"args": '{"n": 1}'})
    with psycopg.connect(dsn, autocommit=True) as conn:
        window = reads.search_window(conn, S, wanted, size=5)
        assert (window.top, window.floor, window.more_below) == (ids[-1] + 1, ids[-1] - 4, True)
        assert reads.list_jobs(conn, S, wanted, window) == []  # n=1 is older than the window
        below = reads.JobFilters.parse({"args": '{"n": 1}', "before": str(window.floor)})
        found = reads.list_jobs(conn, S, below, reads.search_window(conn, S, below, size=5))
        assert [j.id for j in found] == [ids[1]]


def test_bulk_preview_counts_only_what_the_action_accepts_and_stops_at_the_cap(
    dsn: str, client: Client
) -> None:
    queued = [client.enqueue("t", queue="bulk").id for _ in range(4)]
    client.cancel(queued[0])
    filters = reads.JobFilters.parse({"queue": "bulk"})
    with psycopg.connect(dsn, autocommit=True) as conn:
        window = reads.search_window(conn, S, filters)
        cancel = reads.bulk_preview(conn, S, filters, "cancel", window, cap=10)
        retry = reads.bulk_preview(conn, S, filters, "retry", window, cap=10)
        capped = reads.bulk_preview(conn, S, filters, "cancel", window, cap=2)
        assert (cancel.count, cancel.capped, cancel.done) == (3, False, "canceled")
        assert (retry.count, retry.done) == (1, "retried")
        assert (capped.count, capped.capped) == (2, True)
        with pytest.raises(reads.FilterError, match="action"):
            reads.bulk_ids(conn, S, filters, "delete", window)


# -- pages --------------------------------------------------------------------------


PAGES = ("/", "/jobs", "/queues", "/workers", "/schedules", "/fragments/overview")


def test_every_page_answers_and_a_read_only_visitor_gets_no_controls(
    dsn: str, client: Client
) -> None:
    job = client.enqueue("t", queue="pages", args={"who": "<script>x</script>"})
    with web_client(dsn) as web:
        wait_for_snapshot(web, lambda s: s.queue("pages") is not None)
        for path in (*PAGES, f"/jobs/{job.id}", f"/fragments/jobs/{job.id}"):
            as_operator = web.get(path, headers=ADA)
            as_reader = web.get(path, headers=REX)
            assert as_operator.status_code == as_reader.status_code == 200, path
            assert "<script>x</script>" not in as_reader.text  # user data is escaped
            assert 'method="post" action' not in as_reader.text.replace(
                'method="post" action="/logout"', ""
            ), path
        assert 'action="/actions/queues/pages/pause"' in web.get("/queues", headers=ADA).text
        page = web.get(f"/jobs/{job.id}", headers=ADA).text
        assert 'id="cancel-job"' in page
        # A job just enqueued has no stored event: its one timeline row is "enqueued".
        assert "(1 entry)" in page
        assert web.get("/jobs/999999", headers=REX).status_code == 404
        assert web.get("/jobs?status=nope", headers=REX).status_code == 200  # says why


def test_the_live_fragment_resends_the_actions_the_jobs_status_offers(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    """A job that ends while its page is open stops offering Cancel (out-of-band swap)."""
    job = client.enqueue("t", queue="pages")
    with web_client(dsn) as web:
        live = web.get(f"/fragments/jobs/{job.id}", headers=ADA).text
        assert '<div class="actions" id="job-actions" hx-swap-oob="true">' in live
        assert 'id="cancel-job"' in live and 'id="retry-job"' not in live
        # The page itself carries the same block in place, not out of band.
        page = web.get(f"/jobs/{job.id}", headers=ADA).text
        assert page.count('id="job-actions"') == 1 and "hx-swap-oob" not in page
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'canceled', finished_at = now() WHERE id = %s",
            (job.id,),
        )
        live = web.get(f"/fragments/jobs/{job.id}", headers=ADA).text
        assert 'id="cancel-job"' not in live and 'id="retry-job"' in live
        assert 'id="retry-job"' not in web.get(f"/fragments/jobs/{job.id}", headers=REX).text


def test_login_form_sets_a_session_and_pages_send_strangers_to_it(dsn: str) -> None:
    with web_client(dsn) as web:
        stranger = web.get("/queues", follow_redirects=False)
        assert stranger.status_code == 303
        assert stranger.headers["location"] == "/login?next=/queues"
        wrong = web.post("/login", data={"username": "ada", "password": "nope", "next": "/queues"})
        assert wrong.status_code == 401 and "Wrong user name or password" in wrong.text
        ok = web.post(
            "/login",
            data={"username": "ada", "password": "ada-password-42", "next": "//evil.example/"},
            follow_redirects=False,
        )
        assert ok.status_code == 303 and ok.headers["location"] == "/"
        assert web.get("/queues").status_code == 200  # the cookie now
        assert "ada-password-42" not in web.get("/queues").text


def test_actions_change_the_fleet_and_a_forged_post_changes_nothing(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    ids = [client.enqueue("t", queue="acts").id for _ in range(3)]
    with web_client(dsn) as web:
        forged = web.post(
            "/actions/queues/acts/pause",
            headers=ADA | {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        )
        assert forged.status_code == 403
        assert conn.execute(f"SELECT count(*) FROM {S}.queues WHERE paused").fetchone() == (0,)
        refused = web.post("/actions/queues/acts/pause", headers=REX)
        assert refused.status_code == 403
        paused = web.post("/actions/queues/acts/pause", headers=ADA, follow_redirects=False)
        assert paused.status_code == 303 and "queue+acts+paused" in paused.headers["location"]
        assert conn.execute(f"SELECT paused FROM {S}.queues WHERE name = 'acts'").fetchone() == (
            True,
        )
        web.post("/actions/queues/acts/scale", headers=ADA, data={"limit": "2"})
        row = conn.execute(f"SELECT scale_limit FROM {S}.queues WHERE name = 'acts'").fetchone()
        assert row == (2,)
        bad = web.post(
            "/actions/queues/acts/rate", headers=ADA, data={"rate": "-1"}, follow_redirects=False
        )
        assert "failed=" in bad.headers["location"]
        one = web.post(f"/actions/jobs/{ids[0]}/cancel", headers=ADA)
        assert one.status_code == 200 and f"job {ids[0]}: canceled" in one.text
        again = web.post(f"/actions/jobs/{ids[0]}/cancel", headers=ADA)
        assert 'class="banner error"' in again.text  # a refusal, shown, not a 500
        window_top = str(ids[-1] + 1)
        bulk = web.post(
            "/actions/jobs/bulk",
            headers=ADA,
            data={"queue": "acts", "action": "cancel", "before": window_top},
        )
        assert "cancel: 2 job(s)" in bulk.text
        statuses = conn.execute(
            f"SELECT DISTINCT status FROM {S}.jobs WHERE queue = 'acts'"
        ).fetchall()
        assert statuses == [("canceled",)]


def test_workers_page_shows_host_use_and_a_hard_stop_gives_the_job_back(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    job = client.enqueue("t", queue="gpu")
    telemetry = {
        "load": [0.5, 0.4, 0.3],
        "cpu_pct": 37.4,
        "mem_used_bytes": 5 * 2**30,
        "mem_total_bytes": 16 * 2**30,
        "gpu": [{"utilization_pct": 80.0, "memory_used_mib": 8192.0, "memory_total_mib": 16384.0}],
        "gpu_processes": [{"pid": 4242, "memory_used_mib": 6144.0}],
    }
    conn.execute(
        f"INSERT INTO {S}.workers (id, role, queue, host, pid, state, current_job_id, telemetry)"
        " VALUES ('w-gpu', 'worker', 'gpu', 'gpu-1', 4242, 'busy', %s, %s),"
        " ('w-idle', 'worker', 'gpu', 'gpu-1', 4343, 'idle', NULL, NULL)",
        (job.id, json.dumps(telemetry)),
    )
    with web_client(dsn) as web:
        wait_for_snapshot(web, lambda snap: len(snap.workers) == 2)
        page = web.get("/workers", headers=ADA).text
        assert "37% · 5.0/16.0G" in page
        assert "80% 8.0/16.0 GiB (this process 6.0 GiB)" in page
        assert page.count('name="now" value="1"') == 1  # only the busy worker offers it
        done = web.post(
            "/actions/workers/stop", headers=ADA, data={"worker_id": "w-gpu", "now": "1"}
        )
        assert done.status_code == 200 and "gives its running job back" in done.text
        row = conn.execute(
            f"SELECT stop_requested_at IS NOT NULL, stop_now FROM {S}.workers WHERE id = 'w-gpu'"
        ).fetchone()
        assert row == (True, True)
        wait_for_snapshot(web, lambda snap: any(w.stop_now for w in snap.workers))
        assert 'name="now" value="1"' not in web.get("/workers", headers=ADA).text


def test_aggregator_reads_the_fleet_and_draws_the_last_hour_from_finished_jobs(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    from queue_engine.web import live

    done = client.enqueue("t", queue="agg").id
    client.enqueue("t", queue="agg")
    conn.execute(
        f"UPDATE {S}.jobs SET status = 'running', started_at = now() - interval '5 minutes',"
        " attempt = 1, claimed_by = 'w' WHERE id = %s",
        (done,),
    )
    conn.execute(
        f"UPDATE {S}.jobs SET status = 'succeeded', finished_at = now() - interval '3 minutes',"
        " duration_ms = 10 WHERE id = %s",
        (done,),
    )
    aggregator = live.Aggregator(lambda: psycopg.connect(dsn, autocommit=True), S)
    try:
        snap = aggregator.run_once()
        figures = snap.queue("agg")
        assert figures is not None and figures.queued == 1
        chart = aggregator.history.series("agg", "out_1m")
        assert [value for _, value in chart][:1] == [1.0]  # the finished job, 3 minutes ago
        assert snap.version == 1 and snap.error is None
        assert aggregator.run_once().version == 2
    finally:
        aggregator.stop()


MARKED_CELL = r'<td class="num">(~|\N{GREATER-THAN OR EQUAL TO} )\d'


def test_a_backlog_above_the_stats_cap_is_marked_on_the_pages(
    dsn: str, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overview and the queues page mark a figure that is not exact, as `stats` does."""
    import re

    client.enqueue_many([{"task": "t", "queue": "capped"} for _ in range(5)])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ANALYZE {S}.jobs")
    with web_client(dsn) as web:
        wait_for_snapshot(web, lambda s: s.queue("capped") is not None)
        for path in ("/queues", "/fragments/overview"):
            assert re.search(MARKED_CELL, web.get(path, headers=REX).text) is None, path
    monkeypatch.setenv("QUEUE_ENGINE_STATS_EXACT_CAP", "2")
    with web_client(dsn) as web:
        snapshot = wait_for_snapshot(web, lambda s: s.queue("capped") is not None)
        assert snapshot.queue("capped").exactness("queued") != "exact"
        for path in ("/queues", "/fragments/overview"):
            assert re.search(MARKED_CELL, web.get(path, headers=REX).text) is not None, path
