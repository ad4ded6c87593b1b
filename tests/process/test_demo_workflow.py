"""Contract of ``queue-ctl demo --workflow`` against a given database.

It runs the demo's real orchestrator and workers on one workflow (fan-out,
fan-in, an input node), provides the input itself (saying so), ends with the
workflow succeeded and its DAG drawn as ``queue-ctl workflows show`` draws it,
stops every daemon with exit 0, and exits 0. The demo without the flag is
unchanged (tests/process/test_demo.py).
"""

from __future__ import annotations

from typing import Any

from support.ctl import queue_ctl


def test_demo_workflow_runs_to_success_and_draws_the_dag(dsn: str, conn: Any) -> None:
    done = queue_ctl("--dsn", dsn, "demo", "--workflow", "--timeout", "60", timeout=120)
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    row = conn.execute("SELECT id, name, state FROM queue_engine.workflows").fetchone()
    assert row is not None and row[1:] == ("demo-pipeline", "succeeded"), row
    wid = row[0]
    assert f"queue-ctl workflows provide-input {wid} approve " in out
    assert out.index("provides it now") < out.index(f"workflow {wid} demo-pipeline: succeeded")
    assert "\x1b" not in out  # not a terminal: no colour
    drawing = out[out.index(f"workflow {wid} demo-pipeline: succeeded") :].splitlines()
    assert drawing[1] == "  nodes:    9 (9 succeeded)"
    assert any("part-0 … part-4 (5 nodes: 5 succeeded)" in line for line in drawing)
    assert any("─ merge " in line and line.endswith("after: part-0 … part-4") for line in drawing)
    assert any("─ approve (input) " in line and "succeeded" in line for line in drawing)
    assert any("─ publish " in line and line.endswith("after: approve") for line in drawing)
    assert 'publish returned {"published": true, "approved_by": "the demo"}' in out
    assert "stopped: orchestrator exit 0, worker-1 exit 0, worker-2 exit 0" in out
    statuses = conn.execute(
        "SELECT status, count(*) FROM queue_engine.jobs WHERE workflow_id = %s GROUP BY status",
        (wid,),
    ).fetchall()
    assert statuses == [("succeeded", 9)]
    live = conn.execute(
        "SELECT count(*) FROM queue_engine.workers WHERE stopped_at IS NULL"
    ).fetchone()
    assert live == (0,)
