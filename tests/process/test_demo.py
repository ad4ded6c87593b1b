"""Contract of ``queue-ctl demo`` against a given database.

It runs a real ``queue-orchestrator`` and two ``queue-claim-worker`` processes,
every sample job succeeds (the flaky one on its second attempt, the two
lock_key jobs one after the other, the idempotent re-enqueue returning the same
job), it prints the summary, stops every daemon with exit 0, and exits 0.
"""

from __future__ import annotations

from support.ctl import queue_ctl


def test_demo_runs_end_to_end_and_prints_the_summary(dsn: str, conn) -> None:
    done = queue_ctl("--dsn", dsn, "demo", "--timeout", "60", timeout=120)
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr}"
    rows = [line.split() for line in out.splitlines() if line[:6].strip().isdigit()]
    assert len(rows) == 9, out
    assert all(r[2] == "succeeded" for r in rows), out
    attempts = {r[1]: r[3] for r in rows}
    assert attempts["demo.flaky"] == "2/3"
    assert "(created=True), then job" in out and "again (created=False)" in out
    assert "one after the other" in out
    assert 'last reported {"done": 12, "total": 12}' in out
    assert "stopped: orchestrator exit 0, worker-1 exit 0, worker-2 exit 0" in out
    # Everything the demo enqueued is in the database, finished.
    statuses = conn.execute(
        "SELECT status, count(*) FROM queue_engine.jobs WHERE queue = 'demo' GROUP BY status"
    ).fetchall()
    assert statuses == [("succeeded", 9)]
    live = conn.execute(
        "SELECT count(*) FROM queue_engine.workers WHERE stopped_at IS NULL"
    ).fetchone()
    assert live == (0,)
