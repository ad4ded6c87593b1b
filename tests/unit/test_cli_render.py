"""``queue_engine.cli.render``: the text of ``queue-ctl``, from values alone.

The renderers are pure, so their rules are checked here without a database:
column alignment, what a job listing leaves out, the ``-`` of an absent limit,
the prune summary. The acceptance tests check the same text end to end.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from queue_engine.cli import render
from queue_engine.operator import stats
from queue_engine.orchestrator.pruner import PruneResult
from queue_engine.producer.jobs import Job, JobStatus

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def job(**overrides: object) -> Job:
    values: dict[str, object] = {
        "id": 7,
        "queue": "mail",
        "task": "mail.send",
        "args": {"to": "x"},
        "status": JobStatus.QUEUED,
        "priority": 100,
        "available_at": AT,
        "attempt": 0,
        "max_attempts": 5,
        "lease_ttl_s": None,
        "lease_expires_at": None,
        "heartbeat_at": None,
        "claimed_by": None,
        "timeout_s": None,
        "idempotency_key": None,
        "dedupe_key": None,
        "lock_key": None,
        "partition_key": None,
        "producer": None,
        "cancel_requested": False,
        "progress": None,
        "result": None,
        "error": None,
        "created_at": AT,
        "started_at": None,
        "finished_at": None,
        "duration_ms": None,
    }
    values.update(overrides)
    return Job(**values)


def test_table_aligns_columns_and_keeps_the_header_of_an_empty_table() -> None:
    lines = render.table(["NAME", "N"], [["a", "1"], ["long-name", "123"]], right={1})
    assert lines == ["NAME         N", "a            1", "long-name  123"]
    assert render.table(["NAME", "N"], []) == ["NAME  N"]


def test_job_lines_leave_out_empty_fields() -> None:
    lines = render.job_lines(job())
    names = [line.split(":", 1)[0].strip() for line in lines]
    assert names == [
        *("id", "task", "queue", "status", "attempt", "priority", "args"),
        *("available_at", "created_at"),
    ]
    assert "cancel_requested" not in names  # False is not shown
    shown = render.job_lines(job(cancel_requested=True, result={"ok": 1}))
    assert "cancel_requested: True" in "\n".join(shown)
    assert 'result: {"ok": 1}' in "\n".join(shown)
    assert all(line.index(":") == 16 for line in lines)  # names right-aligned in 16


def test_job_list_has_a_header_even_when_empty() -> None:
    (header,) = render.job_list_lines([], now=AT)
    assert header.split() == ["ID", "STATUS", "QUEUE", "TASK", "ATTEMPT", "CREATED", "RUNS"]
    (_, row) = render.job_list_lines([job()], now=AT)
    assert row.split() == ["7", "queued", "mail", "mail.send", "0/5", AT.isoformat()]


def test_a_delayed_job_reads_as_scheduled_with_its_run_time() -> None:
    later = AT + timedelta(minutes=4, seconds=5)
    delayed = job(available_at=later)
    (_, row) = render.job_list_lines([delayed], now=AT)
    assert row.split() == [
        "7",
        "scheduled",
        "mail",
        "mail.send",
        "0/5",
        AT.isoformat(),
        "in",
        "4m05s",
    ]
    status = next(line for line in render.job_lines(delayed, now=AT) if "status:" in line)
    assert status.split(":", 1)[1].strip() == "scheduled, runs in 4m05s (queued until then)"
    # Once its time has come it is an ordinary queued job again.
    (_, due) = render.job_list_lines([delayed], now=later)
    assert due.split()[1] == "queued" and due.split()[-1] == AT.isoformat()


def test_an_input_node_reads_as_awaiting_input_of_its_workflow() -> None:
    node = job(
        task="queue-engine:input",
        status=JobStatus.WAITING,
        workflow_id=3,
        node="approve",
        pending_parents=0,
    )
    (_, row) = render.job_list_lines([node], now=AT)
    assert "awaiting input" in row and "input approve of workflow 3" in row
    assert "queue-engine:input" not in row
    text = "\n".join(render.job_lines(node, now=AT))
    assert "task: input approve of workflow 3" in text
    assert "status: awaiting input (waiting): queue-ctl workflows provide-input 3 approve" in text
    # Before its parents end it is waiting, like any node.
    (_, early) = render.job_list_lines([replace(node, pending_parents=1)], now=AT)
    assert early.split()[1] == "waiting"


def test_limit_cells() -> None:
    assert render.scale_cell(None) == "-" and render.scale_cell(3) == "3"
    assert render.rate_cell(None, None) == "-"
    assert render.rate_cell(2.5, 1) == "2.5/s"
    assert render.rate_cell(2.5, 5) == "2.5/s x5"


def test_prune_summary() -> None:
    dry = PruneResult(jobs={"succeeded": 3, "failed": 1}, events=9, workers=2, dry_run=True)
    assert render.prune_summary(dry) == (
        "would delete 4 jobs (failed 1, succeeded 3), 9 events, 2 worker rows"
    )
    done = PruneResult(batches=2, more=True)
    assert render.prune_summary(done) == (
        "deleted 0 jobs (none), 0 events, 0 worker rows in 2 batches; "
        "more left (--max-batches reached): run again"
    )


def event(kind: str, message: str = "", from_status: str = "running") -> stats.JobEvent:
    return stats.JobEvent(1, AT, kind, from_status, "queued", 1, "w", message)


def test_deaths_count_the_give_backs_since_the_last_retry() -> None:
    timeline = [
        event("claimed", from_status="queued"),
        event("recovered", "worker w gone: ..."),
        event("lost", "lease expired at ..."),
        event("retried", from_status="lost"),
        event("claimed", from_status="queued"),
        event("failed"),  # a handler's own failure is not a death
        event("reaped", "lease expired at ..."),
        event("recovered", "worker w gone: ..."),
        event("lost", "worker w gone: ..."),
    ]
    died = render.deaths(timeline)
    assert died == render.Deaths(count=3, session_ended=2, lease_expired=1)
    assert render.deaths(timeline[:4]) == render.Deaths(0, 0, 0)
    assert render.died_line(render.Deaths(0, 0, 0)) is None
    line = render.died_line(died)
    assert line is not None and line.startswith(
        "3 times while running (database session ended twice: process killed or crashed; "
        "lease expired once: dead, hung or cut off from the database)"
    )


def test_job_lines_show_the_deaths_under_the_attempts() -> None:
    lines = render.job_lines(job(attempt=3, max_attempts=3), died=render.Deaths(3, 3, 0))
    names = [line.split(":", 1)[0].strip() for line in lines]
    assert names[4:6] == ["attempt", "died"]
    assert lines[5].endswith(
        "died: 3 times while running (database session ended 3 times: process killed or "
        "crashed); the exit signal or code is known only to what started the worker "
        "(systemd: journalctl -u UNIT)"
    )
    assert "died" not in "\n".join(render.job_lines(job(), died=render.Deaths(0, 0, 0)))
