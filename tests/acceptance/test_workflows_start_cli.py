"""Contract: ``queue-ctl workflows start NAME --app MODULE --params JSON`` as an operator runs it.

The provider is a function of the app module (``@workflow(NAME)``); the
command starts what it builds (a second run with the same idempotency key
shows the existing one), and an unknown name, bad params or a missing module
are one line with exit 2, nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.ctl import ok, queue_ctl

from queue_engine import Client

APP = """
from queue_engine import Workflow, workflow


@workflow("nightly")
def nightly(params):
    day = params["day"]
    wf = Workflow("nightly", idempotency_key=f"nightly:{day}")
    wf.add("fetch", "etl.fetch", queue="wfstart", args={"day": day})
    wf.add("load", "etl.load", queue="wfstart", after=["fetch"])
    return wf
"""


@pytest.fixture
def app_path(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "flows_app.py").write_text(APP)
    return {"PYTHONPATH": str(tmp_path)}


def test_start_builds_the_named_workflow_once(
    dsn: str, client: Client, app_path: dict[str, str]
) -> None:
    args = ("--dsn", dsn, "workflows", "start", "nightly", "--app", "flows_app")
    out = ok(queue_ctl(*args, "--params", '{"day": "2026-11-23"}', env=app_path))
    [info] = client.list_workflows()
    assert out == f"workflow {info.id} nightly: started; 2 node(s), running\n"
    again = json.loads(
        ok(queue_ctl(*args, "--params", '{"day": "2026-11-23"}', "--json", env=app_path))
    )
    assert again["id"] == info.id and again["created"] is False
    assert [n.node for n in client.workflow_nodes(info.id)] == ["fetch", "load"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("nope", "--app", "flows_app"), "no workflow provider named 'nope' (known: nightly)"),
        (
            ("nightly", "--app", "flows_app", "--params", "[1]"),
            "--params must be a JSON object, got list",
        ),
        (
            ("nightly", "--app", "flows_app", "--params", "{"),
            "--params (--params) is not valid JSON",
        ),
        (("nightly", "--app", "flows_app"), "refused its params: KeyError: 'day'"),
        (("nightly", "--app", "no_such_app"), "app module 'no_such_app' not found"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    dsn: str, client: Client, app_path: dict[str, str], extra: tuple[str, ...], message: str
) -> None:
    result = queue_ctl("--dsn", dsn, "workflows", "start", *extra, env=app_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert client.list_workflows() == []
