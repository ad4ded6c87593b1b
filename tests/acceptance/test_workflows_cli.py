"""Contract: ``queue-ctl workflows list|show|cancel|retry|provide-input`` as an operator runs them.

Workflows are started and run on a real database (the client and the testing
kit's drain); every command runs as a subprocess. ``list`` is a table (and
``--json``) with keyset paging; ``show`` draws the DAG by level with a fan-out
collapsed, plain when stdout is not a terminal and coloured on ``--color
always``; ``provide-input`` takes JSON, ``@file`` or ``-`` (stdin) and says so
on a second call (exit 0); cancel and retry say what they did; bad input is
one line with exit 2, a request that does not apply one line with exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.ctl import ok, queue_ctl

from queue_engine import Client, Permanent, Workflow, finished
from queue_engine.producer.context import JobContext
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain

Q = "wfcli"
PARTS = 6


def registry(**handlers: Any) -> TaskRegistry:
    reg = TaskRegistry()
    for name, fn in handlers.items():
        reg.register(
            TaskDefinition(name=name, handler=fn, queue=Q, max_attempts=1, wants_context=True)
        )
    return reg


def work(args: dict[str, Any], ctx: JobContext) -> Any:
    return {"node": ctx.node}


def boom(args: dict[str, Any], ctx: JobContext) -> Any:
    raise Permanent("boom on purpose")


TASKS = registry(work=work, boom=boom)


def pipeline(name: str = "pipeline") -> Workflow:
    wf = Workflow(name)
    wf.add("fetch", "work", queue=Q)
    parts = [wf.add(f"parse-{i}", "work", queue=Q, after=["fetch"]) for i in range(PARTS)]
    wf.add("aggregate", "work", queue=Q, after=parts)
    wf.input("approve", after=["aggregate"])
    wf.add("publish", "work", queue=Q, after=["approve"])
    wf.add("report", "work", queue=Q, after=[finished("aggregate")])
    return wf


def one_error_line(result: Any, code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("queue-ctl: error: "), lines[0]
    return str(lines[0])


def test_list_shows_workflows_newest_first_with_counts_and_pages(dsn: str, client: Client) -> None:
    first = client.start_workflow(pipeline("first"))
    second = client.start_workflow(pipeline("second"))
    out = ok(queue_ctl("--dsn", dsn, "workflows", "list")).splitlines()
    assert out[0].split() == [
        "ID",
        "NAME",
        "STATE",
        "NODES",
        "OPEN",
        "OK",
        "FAILED",
        "CANCELED",
        "LOST",
        "SKIPPED",
        "AGE",
    ]
    rows = [line.split() for line in out[1:]]
    assert [r[:10] for r in rows] == [
        [str(second.id), "second", "running", "11", "11", "0", "0", "0", "0", "0"],
        [str(first.id), "first", "running", "11", "11", "0", "0", "0", "0", "0"],
    ]
    assert "\x1b" not in "\n".join(out)

    page = queue_ctl("--dsn", dsn, "workflows", "list", "--limit", "1")
    assert [line.split()[0] for line in ok(page).splitlines()[1:]] == [str(second.id)]
    assert f"--before-id {second.id}" in page.stderr
    older = ok(queue_ctl("--dsn", dsn, "workflows", "list", "--before-id", str(second.id)))
    assert [line.split()[0] for line in older.splitlines()[1:]] == [str(first.id)]

    docs = json.loads(ok(queue_ctl("--dsn", dsn, "workflows", "list", "--json", "--name", "first")))
    assert [(d["id"], d["state"], d["counts"]["unfinished"]) for d in docs] == [
        (first.id, "running", 11)
    ]
    none = ok(queue_ctl("--dsn", dsn, "workflows", "list", "--state", "succeeded"))
    assert none.splitlines()[1:] == ["(no workflows)"]


def test_show_draws_the_dag_and_provide_input_releases_the_children(
    dsn: str, client: Client
) -> None:
    info = client.start_workflow(pipeline())
    wid = str(info.id)
    drain(client, queue=Q, tasks=TASKS)

    out = ok(queue_ctl("--dsn", dsn, "workflows", "show", wid))
    assert "\x1b" not in out
    lines = out.splitlines()
    assert lines[0] == f"workflow {wid} pipeline: running"
    assert lines[1] == "  nodes:    11 (9 succeeded, 2 unfinished)"
    assert "level 0" in lines and "level 3" in lines
    group = next(line for line in lines if "parse-0 … parse-5" in line)
    assert f"({PARTS} nodes: {PARTS} succeeded)" in group and group.endswith("after: fetch")
    aggregate = next(line for line in lines if "─ aggregate " in line)
    assert aggregate.split()[2:4] == ["succeeded", "1/5"]
    assert aggregate.endswith("after: parse-0 … parse-5")
    approve = next(line for line in lines if "approve (input)" in line)
    assert "awaiting input" in approve and approve.endswith("after: aggregate")
    report = next(line for line in lines if "─ report " in line)
    assert report.endswith("after: aggregate (finished)")
    publish = next(line for line in lines if "─ publish " in line)
    assert "waiting" in publish and publish.endswith("after: approve")

    expanded = ok(queue_ctl("--dsn", dsn, "workflows", "show", wid, "--all"))
    assert "…" not in expanded and "─ parse-3 " in expanded
    assert "after: parse-0, parse-1, parse-2, parse-3, parse-4, parse-5" in expanded
    coloured = ok(queue_ctl("--dsn", dsn, "workflows", "show", wid, "--color", "always"))
    assert "\x1b[32m" in coloured  # succeeded in green
    doc = json.loads(ok(queue_ctl("--dsn", dsn, "workflows", "show", wid, "--json")))
    assert doc["state"] == "running" and len(doc["nodes"]) == 11
    assert {n["node"]: n["status"] for n in doc["nodes"]}["approve"] == "waiting"

    given = ok(
        queue_ctl("--dsn", dsn, "workflows", "provide-input", wid, "approve", '{"by": "ana"}')
    )
    assert given.strip() == f"workflow {wid}: input approve provided; its children are released"
    again = ok(queue_ctl("--dsn", dsn, "workflows", "provide-input", wid, "approve", '"bob"'))
    assert again.strip() == f"workflow {wid}: input approve was already provided; nothing changed"
    assert {n.node: n.result for n in client.workflow_nodes(info.id)}["approve"] == {"by": "ana"}

    drain(client, queue=Q, tasks=TASKS)
    done = ok(queue_ctl("--dsn", dsn, "workflows", "show", wid)).splitlines()
    assert done[0] == f"workflow {wid} pipeline: succeeded"
    assert done[1] == "  nodes:    11 (11 succeeded)"
    assert any(line.startswith("  finished: ") for line in done)


def test_provide_input_reads_a_file_or_stdin(dsn: str, client: Client, tmp_path: Path) -> None:
    wf = Workflow("inputs")
    wf.input("a")
    wf.input("b")
    wid = str(client.start_workflow(wf).id)
    value = tmp_path / "value.json"
    value.write_text('{"file": ["x", 1]}\n')
    ok(queue_ctl("--dsn", dsn, "workflows", "provide-input", wid, "a", f"@{value}"))
    ok(queue_ctl("--dsn", dsn, "workflows", "provide-input", wid, "b", "-", stdin='{"in": true}'))
    results = {n.node: n.result for n in client.workflow_nodes(int(wid))}
    assert results == {"a": {"file": ["x", 1]}, "b": {"in": True}}
    assert client.get_workflow(int(wid)).state == "succeeded"


def test_cancel_and_retry_say_what_they_did(dsn: str, client: Client) -> None:
    wf = Workflow("flaky")
    wf.add("first", "boom", queue=Q)
    wf.add("second", "work", queue=Q, after=["first"])
    wf.add("third", "work", queue=Q, after=["second"])
    wid = client.start_workflow(wf).id
    drain(client, queue=Q, tasks=TASKS)
    shown = ok(queue_ctl("--dsn", dsn, "workflows", "show", str(wid)))
    assert shown.splitlines()[0] == f"workflow {wid} flaky: failed"
    first = shown.splitlines()[shown.splitlines().index("level 0") + 2]
    assert first.strip().startswith("error: ") and first.endswith("boom on purpose"), first
    assert "error: canceled: upstream node first failed" in shown

    rerun = ok(queue_ctl("--dsn", dsn, "workflows", "retry", str(wid)))
    assert rerun.strip() == f"workflow {wid}: 3 node(s) to run again; it is running"
    running = one_error_line(queue_ctl("--dsn", dsn, "workflows", "retry", str(wid)), 1)
    assert f"cannot retry workflow {wid}: it is still running" in running
    canceled = ok(queue_ctl("--dsn", dsn, "workflows", "cancel", str(wid)))
    assert canceled.strip() == f"workflow {wid}: 3 node(s) canceled"
    twice = one_error_line(queue_ctl("--dsn", dsn, "workflows", "cancel", str(wid)), 1)
    assert twice.endswith(f"cannot cancel workflow {wid}: it has already ended")
    assert client.get_workflow(wid).state == "canceled"

    good = Workflow("good")
    good.add("only", "work", queue=Q)
    gid = client.start_workflow(good).id
    drain(client, queue=Q, tasks=TASKS)
    line = one_error_line(queue_ctl("--dsn", dsn, "workflows", "retry", str(gid)), 1)
    assert line.endswith(
        f"workflow {gid} is succeeded with no failed, canceled or lost node: nothing to re-run"
    )


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("show", "abc"), 2, "'abc' is not a valid integer"),
        (("show", "0"), 2, "WORKFLOW_ID"),
        (("show", str(2**63)), 2, "WORKFLOW_ID"),
        (("list", "--before-id", str(2**63)), 2, "--before-id"),
        (("show", "999999"), 1, "workflow 999999 not found"),
        (("cancel", "999999"), 1, "workflow 999999 not found"),
        (("retry", "999999"), 1, "workflow 999999 not found"),
        (("list", "--state", "done"), 2, "'done' is not one of"),
        (("list", "--limit", "0"), 2, "--limit"),
        (("list", "--before-id", "-3"), 2, "--before-id"),
        (("provide-input", "{wid}", "approve", "{bad"), 2, "VALUE (VALUE) is not valid JSON"),
        (("provide-input", "{wid}", "approve", "yes"), 2, "is not valid JSON"),
        (("provide-input", "{wid}", "approve", "@/no/such/file"), 2, "cannot read VALUE"),
        (("provide-input", "{wid}", "bad name!", "1"), 2, "node must be a node name"),
        (("provide-input", "{wid}", "nothing", "1"), 1, "node nothing of workflow {wid} not found"),
        (("provide-input", "{wid}", "fetch", "1"), 1, "is not an input node"),
        (("provide-input", "{wid}", "approve", "1"), 1, "is not awaiting input yet"),
        (("provide-input", "999999", "approve", "1"), 1, "not found"),
        (("provide-input", "{wid}", "approve"), 2, "Missing argument 'VALUE'"),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(
    dsn: str, client: Client, args: tuple[str, ...], code: int, says: str
) -> None:
    wid = str(client.start_workflow(pipeline()).id)
    result = queue_ctl("--dsn", dsn, "workflows", *(a.replace("{wid}", wid) for a in args))
    line = one_error_line(result, code)
    assert says.replace("{wid}", wid) in line, line
    assert "Traceback" not in result.stderr


def test_a_database_without_the_workflow_tables_says_migrate(empty_dsn: str) -> None:
    for args in (("list",), ("show", "1"), ("cancel", "1"), ("provide-input", "1", "a", "1")):
        line = one_error_line(queue_ctl("--dsn", empty_dsn, "workflows", *args), 3)
        assert "queue-ctl migrate" in line, line
