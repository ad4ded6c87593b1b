"""Fleet controls (``queue-ctl scale``, ``rate``, ``park``, ``unpark``, ``stop``, ``controls``).

Against a real Postgres: each control's rows, its idempotency, the NOTIFY it
sends on ``<schema>.controls`` (and ``<schema>.jobs`` when idle workers may
claim at once) in its own transaction, the refusals (bad input: exit 2 before
connecting; no live worker: exit 1, nothing written), the token bucket of
``take_rate_tokens`` measured against the database clock, and the CLI as an
operator runs it. Worker rows are written with plain SQL: the controls only
read and flag them, running workers are the worker tests' business.
"""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any

import psycopg
import pytest
from support.ctl import queue_ctl

from queue_engine import Client
from queue_engine.foundation.errors import ValidationError
from queue_engine.foundation.migrate import Migrator
from queue_engine.operator import stats
from queue_engine.operator.controls import (
    FleetTarget,
    NoLiveWorker,
    controls,
    park,
    pause_queue,
    rate_queue,
    resume_queue,
    scale_queue,
    stop_workers,
    unpark,
)
from queue_engine.worker import store

SCHEMA = "queue_engine"
CONTROLS = "queue_engine.controls"
JOBS = "queue_engine.jobs"


# -- helpers -----------------------------------------------------------------------


def add_worker(
    conn: psycopg.Connection[Any],
    wid: str,
    *,
    host: str = "gpu-1",
    queue: str | None = "infer",
    role: str = "worker",
    stopped: bool = False,
    flagged: bool = False,
    warm_key: str | None = None,
) -> None:
    conn.execute(
        "INSERT INTO queue_engine.workers (id, role, queue, host, pid, state, stopped_at, "
        "flagged_dead_at, warm_key) VALUES (%s, %s, %s, %s, 4242, %s, "
        "CASE WHEN %s THEN now() END, CASE WHEN %s THEN now() END, %s)",
        (wid, role, queue, host, "stopped" if stopped else "idle", stopped, flagged, warm_key),
    )


def fleet(conn: psycopg.Connection[Any]) -> None:
    """Two hosts: gpu-1 runs infer x2 and etl, gpu-2 runs infer; plus rows that never match."""
    add_worker(conn, "w-a", warm_key="model-a")
    add_worker(conn, "w-b")
    add_worker(conn, "w-etl", queue="etl")
    add_worker(conn, "w-other", host="gpu-2")
    add_worker(conn, "w-stopped", stopped=True)
    add_worker(conn, "w-dead", flagged=True)
    add_worker(conn, "orch-1", queue=None, role="orchestrator")


def parks(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT worker_id, host, queue FROM queue_engine.worker_parks "
        "ORDER BY worker_id NULLS LAST, host, queue NULLS FIRST"
    ).fetchall()


def stop_flags(conn: psycopg.Connection[Any]) -> dict[str, bool]:
    rows = conn.execute("SELECT id, stop_requested_at IS NOT NULL FROM queue_engine.workers")
    return dict(rows.fetchall())


def queue_row(conn: psycopg.Connection[Any], name: str) -> tuple[Any, ...] | None:
    return conn.execute(
        "SELECT scale_limit, rate_limit, rate_burst, rate_tokens, rate_refilled_at IS NOT NULL "
        "FROM queue_engine.queues WHERE name = %s",
        (name,),
    ).fetchone()


class Listener:
    """A second connection LISTENing on the controls and jobs channels."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(f'LISTEN "{CONTROLS}"')
        self.conn.execute(f'LISTEN "{JOBS}"')

    def drain(self) -> list[tuple[str, str]]:
        """Every notification delivered so far (the sender has committed by now)."""
        got = [(n.channel, n.payload) for n in self.conn.notifies(timeout=0.5)]
        return sorted(got)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def listener(dsn: str) -> Any:
    lst = Listener(dsn)
    yield lst
    lst.close()


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("queue-ctl: error:") and "Traceback" not in result.stderr
    return lines[0]


# -- scale -------------------------------------------------------------------------


def test_scale_sets_and_clears_the_limit_idempotently(conn) -> None:
    first = scale_queue(conn, SCHEMA, "infer", "3")
    assert (first.previous, first.limit, first.changed) == (None, 3, True)
    assert queue_row(conn, "infer") == (3, None, 1, None, False)
    again = scale_queue(conn, SCHEMA, "infer", 3)
    assert (again.previous, again.changed) == (3, False)
    assert scale_queue(conn, SCHEMA, "infer", 0).previous == 3
    off = scale_queue(conn, SCHEMA, "infer", "off")
    assert (off.previous, off.limit, off.changed) == (0, None, True)
    assert queue_row(conn, "infer") == (None, None, 1, None, False)
    assert not scale_queue(conn, SCHEMA, "infer", None).changed
    # Scaling keeps the queue's other controls.
    pause_queue(conn, SCHEMA, "infer")
    scale_queue(conn, SCHEMA, "infer", 10_000)
    row = conn.execute("SELECT paused FROM queue_engine.queues WHERE name = 'infer'").fetchone()
    assert row == (True,)


@pytest.mark.parametrize("bad", ["-1", "10001", "1.5", "", "x", "OFFF", "1e3", -1, True])
def test_scale_refuses_bad_limits_before_writing(conn, bad: Any) -> None:
    with pytest.raises(ValidationError, match="off"):
        scale_queue(conn, SCHEMA, "infer", bad)
    assert queue_row(conn, "infer") is None


def test_scale_notifies_controls_always_and_jobs_only_when_workers_may_claim_more(
    conn, listener: Listener
) -> None:
    scale_queue(conn, SCHEMA, "infer", 0)  # down from no limit: nobody to wake
    assert listener.drain() == [(CONTROLS, "infer")]
    scale_queue(conn, SCHEMA, "infer", 2)  # up
    assert listener.drain() == [(CONTROLS, "infer"), (JOBS, "infer")]
    scale_queue(conn, SCHEMA, "infer", 1)  # down
    assert listener.drain() == [(CONTROLS, "infer")]
    scale_queue(conn, SCHEMA, "infer", "off")  # no limit any more
    assert listener.drain() == [(CONTROLS, "infer"), (JOBS, "infer")]


def test_pause_and_resume_notify_the_controls_channel_too(conn, listener: Listener) -> None:
    pause_queue(conn, SCHEMA, "infer")
    assert listener.drain() == [(CONTROLS, "infer")]
    resume_queue(conn, SCHEMA, "infer")
    assert listener.drain() == [(CONTROLS, "infer"), (JOBS, "infer")]


# -- rate --------------------------------------------------------------------------


def test_rate_sets_resets_keeps_and_clears_the_bucket(conn) -> None:
    first = rate_queue(conn, SCHEMA, "api", "10", burst=3)
    assert (first.previous_rate, first.rate, first.burst, first.changed) == (None, 10.0, 3, True)
    assert queue_row(conn, "api") == (None, 10.0, 3, None, True)  # NULL tokens: a full burst
    assert conn.execute("SELECT queue_engine.take_rate_tokens('api', 3)").fetchone() == (3,)
    spent = queue_row(conn, "api")
    assert spent is not None and spent[3] is not None and spent[3] < 1
    # The same rate and burst again: unchanged, the bucket is kept (no extra burst).
    again = rate_queue(conn, SCHEMA, "api", 10.0, burst=3)
    assert (again.previous_rate, again.previous_burst, again.changed) == (10.0, 3, False)
    kept = queue_row(conn, "api")
    assert kept is not None and kept[3] == spent[3]
    # A new burst (or rate) resets the bucket to full.
    changed = rate_queue(conn, SCHEMA, "api", 10.0)
    assert (changed.previous_burst, changed.burst, changed.changed) == (3, 1, True)
    assert queue_row(conn, "api") == (None, 10.0, 1, None, True)
    off = rate_queue(conn, SCHEMA, "api", "off")
    assert (off.previous_rate, off.previous_burst, off.rate, off.burst) == (10.0, 1, None, None)
    assert queue_row(conn, "api") == (None, None, 1, None, False)
    assert not rate_queue(conn, SCHEMA, "api", None).changed


@pytest.mark.parametrize(
    ("rate", "burst", "match"),
    [
        ("0", None, "more than 0"),
        ("-2", None, "more than 0"),
        ("100001", None, "at most 100000"),
        ("nan", None, "rate"),
        ("inf", None, "rate"),
        ("fast", None, "off"),
        ("5", 0, "burst"),
        ("5", 100_001, "burst"),
        ("off", 2, "--burst goes with a rate"),
    ],
)
def test_rate_refuses_bad_values_before_writing(conn, rate: str, burst: Any, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        rate_queue(conn, SCHEMA, "api", rate, burst=burst)
    assert queue_row(conn, "api") is None


def test_rate_notifies_controls_and_jobs(conn, listener: Listener) -> None:
    rate_queue(conn, SCHEMA, "api", 0.5)
    assert listener.drain() == [(CONTROLS, "api"), (JOBS, "api")]
    rate_queue(conn, SCHEMA, "api", "off")
    assert listener.drain() == [(CONTROLS, "api"), (JOBS, "api")]


def _take_for(dsn: str, queue: str, want: int, seconds: float, out: list[int]) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        deadline = c.execute("SELECT clock_timestamp() + make_interval(secs => %s)", (seconds,))
        end = deadline.fetchone()
        assert end is not None
        while True:
            row = c.execute(
                "SELECT queue_engine.take_rate_tokens(%s, %s), clock_timestamp() < %s",
                (queue, want, end[0]),
            ).fetchone()
            assert row is not None
            out.append(int(row[0]))
            if not row[1]:
                return


def test_take_rate_tokens_never_grants_more_than_burst_plus_rate_times_elapsed(
    dsn: str, conn
) -> None:
    rate_queue(conn, SCHEMA, "api", 10.0, burst=3)
    start = conn.execute(
        "SELECT rate_refilled_at FROM queue_engine.queues WHERE name = 'api'"
    ).fetchone()
    assert start is not None
    # Two sessions take tokens in separate transactions, as fast as they can, for
    # a short real interval (autocommit: every call commits on its own).
    grants: list[list[int]] = [[], []]
    threads = [threading.Thread(target=_take_for, args=(dsn, "api", 2, 0.8, out)) for out in grants]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    # The bucket's own clock: the last grant's time (kept monotonic by the function).
    end = conn.execute(
        "SELECT rate_refilled_at, rate_tokens FROM queue_engine.queues WHERE name = 'api'"
    ).fetchone()
    assert end is not None
    elapsed = (end[0] - start[0]).total_seconds()
    total = sum(sum(g) for g in grants)
    calls = sum(len(g) for g in grants)
    assert calls > 20  # the callers really did compete for tokens
    assert all(0 <= n <= 2 for g in grants for n in g)
    assert total <= 3 + 10.0 * elapsed + 1e-6
    # And the bucket does hand out what the rate allows (less at most the last
    # fraction of a token and what refilled while it was full before the first call).
    assert total >= 10.0 * elapsed - 3
    assert end[1] is not None and 0 <= end[1] < 3


def test_take_rate_tokens_without_a_rate_limit_grants_what_is_asked(conn) -> None:
    take = "SELECT queue_engine.take_rate_tokens(%s, %s)"
    assert conn.execute(take, ("no.row", 7)).fetchone() == (7,)
    pause_queue(conn, SCHEMA, "paused.only")  # a row, but no rate limit
    assert conn.execute(take, ("paused.only", 5)).fetchone() == (5,)
    assert queue_row(conn, "paused.only") == (None, None, 1, None, False)  # nothing written
    rate_queue(conn, SCHEMA, "limited", 1.0, burst=2)
    assert conn.execute(take, ("limited", 0)).fetchone() == (0,)
    assert conn.execute(take, ("limited", 5)).fetchone() == (2,)


# -- park / unpark -----------------------------------------------------------------


def test_park_host_holds_for_all_or_one_queue_and_is_idempotent(conn) -> None:
    fleet(conn)
    result = park(conn, SCHEMA, FleetTarget(host="gpu-1"))
    assert result.created and result.worker_ids == ["w-a", "w-b", "w-etl"]
    again = park(conn, SCHEMA, FleetTarget(host="gpu-1"))
    assert not again.created and again.parked_at == result.parked_at
    one = park(conn, SCHEMA, FleetTarget(host="gpu-2", queue="infer"))
    assert one.created and one.worker_ids == ["w-other"] and not one.covered_by_host_park
    covered = park(conn, SCHEMA, FleetTarget(host="gpu-1", queue="etl"))
    assert covered.created and covered.covered_by_host_park and covered.worker_ids == ["w-etl"]
    future = park(conn, SCHEMA, FleetTarget(host="gpu-9"))  # no worker there yet
    assert future.created and future.worker_ids == []
    assert parks(conn) == [
        (None, "gpu-1", None),
        (None, "gpu-1", "etl"),
        (None, "gpu-2", "infer"),
        (None, "gpu-9", None),
    ]


def test_park_worker_needs_a_live_worker(conn, listener: Listener) -> None:
    fleet(conn)
    listener.drain()
    result = park(conn, SCHEMA, FleetTarget(worker_id="w-a"))
    assert result.created and (result.host, result.queue) == ("gpu-1", "infer")
    assert not park(conn, SCHEMA, FleetTarget(worker_id="w-a")).created
    assert listener.drain() == [(CONTROLS, "*"), (CONTROLS, "*")]
    for wid in ("nope", "w-stopped", "w-dead", "orch-1"):
        with pytest.raises(NoLiveWorker, match=f"no live worker with id '{wid}'"):
            park(conn, SCHEMA, FleetTarget(worker_id=wid))
    assert parks(conn) == [("w-a", None, None)]
    assert listener.drain() == []  # a refused park sent nothing


def test_park_rows_are_what_the_claim_gate_reads(client: Client, conn) -> None:
    """The rows park writes are the ones the worker's claim statement honours."""
    job = client.enqueue("t.park", queue="infer").id

    def claim(host: str, worker_id: str = "w-gate") -> list[int]:
        gate = store.ClaimGate(host=host)
        result = store.finish_and_claim(
            conn, SCHEMA, worker_id=worker_id, queue="infer", claim_limit=1, gate=gate
        )
        return [j.id for j in result.claimed]

    add_worker(conn, "w-gate", host="gpu-1")
    park(conn, SCHEMA, FleetTarget(host="gpu-1", queue="infer"))
    assert claim("gpu-1") == []
    unpark(conn, SCHEMA, FleetTarget(host="gpu-1"))
    park(conn, SCHEMA, FleetTarget(worker_id="w-gate"))
    assert claim("gpu-1") == []
    unpark(conn, SCHEMA, FleetTarget(worker_id="w-gate"))
    park(conn, SCHEMA, FleetTarget(host="gpu-1", queue="etl"))  # another queue: no effect
    assert claim("gpu-1") == [job]


def test_unpark_host_removes_every_park_of_the_host_or_one_queue(conn, listener) -> None:
    fleet(conn)
    park(conn, SCHEMA, FleetTarget(host="gpu-1"))
    park(conn, SCHEMA, FleetTarget(host="gpu-1", queue="infer"))
    park(conn, SCHEMA, FleetTarget(host="gpu-1", queue="etl"))
    park(conn, SCHEMA, FleetTarget(worker_id="w-b"))
    park(conn, SCHEMA, FleetTarget(host="gpu-2"))
    listener.drain()
    one = unpark(conn, SCHEMA, FleetTarget(host="gpu-1", queue="infer"))
    assert one.removed == ["infer"]
    assert one.host_parked_at is not None  # the all-queue park still holds
    assert one.parked_worker_ids == ["w-b"]
    assert listener.drain() == [(CONTROLS, "*")]
    again = unpark(conn, SCHEMA, FleetTarget(host="gpu-1", queue="infer"))
    assert again.removed == [] and again.host_parked_at is not None
    every = unpark(conn, SCHEMA, FleetTarget(host="gpu-1"))
    assert every.removed == [None, "etl"] and every.host_parked_at is None
    assert every.parked_worker_ids == ["w-b"]  # parked by id: not a host park
    assert parks(conn) == [("w-b", None, None), (None, "gpu-2", None)]
    assert unpark(conn, SCHEMA, FleetTarget(host="gpu-1")).removed == []


def test_unpark_worker_reports_host_parks_that_still_hold(conn) -> None:
    fleet(conn)
    park(conn, SCHEMA, FleetTarget(worker_id="w-a"))
    park(conn, SCHEMA, FleetTarget(host="gpu-1", queue="infer"))
    result = unpark(conn, SCHEMA, FleetTarget(worker_id="w-a"))
    assert result.removed == [None] and result.host_parks == ["infer"] and result.host == "gpu-1"
    again = unpark(conn, SCHEMA, FleetTarget(worker_id="w-a"))
    assert again.removed == []
    assert unpark(conn, SCHEMA, FleetTarget(worker_id="w-stopped")).removed == []
    with pytest.raises(NoLiveWorker, match="no worker with id 'ghost'"):
        unpark(conn, SCHEMA, FleetTarget(worker_id="ghost"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "say which workers"),
        ({"queue": "infer"}, "queue-ctl pause infer"),
        ({"host": "h", "worker_id": "w"}, "not both"),
        ({"worker_id": "w", "queue": "infer"}, "--queue goes with --host"),
        ({"host": "has space"}, "invalid host"),
        ({"host": ""}, "invalid host"),
        ({"host": "h" * 256}, "invalid host"),
        ({"host": "h", "queue": "bad queue"}, "invalid queue name"),
        ({"worker_id": "w\n"}, "invalid worker id"),
    ],
)
def test_targets_are_validated_before_writing(conn, kwargs: dict[str, Any], match: str) -> None:
    for action in (park, unpark, stop_workers):
        with pytest.raises(ValidationError, match=match):
            action(conn, SCHEMA, FleetTarget(**kwargs))
    assert parks(conn) == []


# -- stop --------------------------------------------------------------------------


def test_stop_flags_matching_live_workers_once(conn, listener: Listener) -> None:
    fleet(conn)
    listener.drain()
    first = stop_workers(conn, SCHEMA, FleetTarget(host="gpu-1", queue="infer"))
    assert [(r.worker_id, r.already) for r in first] == [("w-a", False), ("w-b", False)]
    assert listener.drain() == [(CONTROLS, "*")]
    flags = stop_flags(conn)
    assert {w for w, asked in flags.items() if asked} == {"w-a", "w-b"}
    second = stop_workers(conn, SCHEMA, FleetTarget(host="gpu-1"))
    assert [(r.worker_id, r.already) for r in second] == [
        ("w-a", True),
        ("w-b", True),
        ("w-etl", False),
    ]
    assert second[0].stop_requested_at == first[0].stop_requested_at  # the first time is kept
    one = stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-other"))
    assert [r.worker_id for r in one] == ["w-other"]
    listener.drain()
    for target in (
        FleetTarget(worker_id="w-stopped"),
        FleetTarget(worker_id="orch-1"),
        FleetTarget(worker_id="ghost"),
        FleetTarget(host="gpu-7"),
        FleetTarget(host="gpu-2", queue="etl"),
    ):
        with pytest.raises(NoLiveWorker, match="no live worker"):
            stop_workers(conn, SCHEMA, target)
    assert listener.drain() == []
    flags = stop_flags(conn)
    assert not flags["w-stopped"] and not flags["w-dead"] and not flags["orch-1"]


def test_stop_now_sets_the_hard_flag_and_upgrades_a_plain_stop_but_never_downgrades(
    conn, listener: Listener
) -> None:
    fleet(conn)
    listener.drain()

    def hard() -> dict[str, bool]:
        rows = conn.execute(f"SELECT id, stop_now FROM {SCHEMA}.workers").fetchall()
        return {r[0]: r[1] for r in rows}

    plain = stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-a"))
    assert [(r.already, r.now) for r in plain] == [(False, False)]
    assert not hard()["w-a"]
    upgraded = stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-a"), now=True)
    assert [(r.already, r.now) for r in upgraded] == [(False, True)]  # news to the worker
    assert upgraded[0].stop_requested_at == plain[0].stop_requested_at
    assert hard()["w-a"]
    again = stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-a"), now=True)
    assert [(r.already, r.now) for r in again] == [(True, True)]
    later = stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-a"))
    assert [(r.already, r.now) for r in later] == [(True, True)] and hard()["w-a"]
    assert listener.drain() == [(CONTROLS, "*")] * 4
    assert not hard()["w-b"]  # nobody else


# -- the controls view, stats and workers ----------------------------------------------


def test_controls_view_lists_every_control_in_force(conn) -> None:
    fleet(conn)
    pause_queue(conn, SCHEMA, "etl")
    scale_queue(conn, SCHEMA, "infer", 2)
    rate_queue(conn, SCHEMA, "api", 2.5, burst=4)
    pause_queue(conn, SCHEMA, "was.paused")
    resume_queue(conn, SCHEMA, "was.paused")  # back to defaults: not listed
    park(conn, SCHEMA, FleetTarget(host="gpu-1", queue="infer"))
    park(conn, SCHEMA, FleetTarget(worker_id="w-other"))
    stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-etl"))
    view = controls(conn, SCHEMA)
    assert [
        (q.queue, q.paused, q.scale_limit, q.rate_limit, q.rate_burst) for q in view.queues
    ] == [
        ("api", False, None, 2.5, 4),
        ("etl", True, None, None, None),
        ("infer", False, 2, None, None),
    ]
    assert [(p.kind, p.host, p.queue, p.worker_id, p.live_workers) for p in view.parks] == [
        ("host", "gpu-1", "infer", None, 2),
        ("worker", "gpu-2", "infer", "w-other", 1),
    ]
    assert [(s.worker_id, s.host, s.queue, s.stop_now) for s in view.stops] == [
        ("w-etl", "gpu-1", "etl", False)
    ]
    stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-etl"), now=True)
    assert [s.stop_now for s in controls(conn, SCHEMA).stops] == [True]
    doc = json.loads(json.dumps(view.to_dict()))
    assert set(doc) == {"queues", "parks", "stops"}
    assert isinstance(doc["parks"][0]["parked_at"], str)


def test_stats_and_workers_show_the_new_fields(conn, client: Client) -> None:
    fleet(conn)
    client.enqueue("t.x", queue="infer")
    scale_queue(conn, SCHEMA, "infer", 1)
    rate_queue(conn, SCHEMA, "api", 3, burst=2)  # no jobs, no workers: listed for its limit
    conn.execute("UPDATE queue_engine.workers SET state = 'parked' WHERE id = 'w-b'")
    stop_workers(conn, SCHEMA, FleetTarget(worker_id="w-a"))
    rows = {q.queue: q for q in stats.queue_stats(conn, SCHEMA)}
    assert set(rows) == {"api", "etl", "infer"}
    infer = rows["infer"]
    assert (infer.scale_limit, infer.rate_limit, infer.rate_burst) == (1, None, None)
    assert (infer.workers_live, infer.workers_parked, infer.workers_dead) == (3, 1, 1)
    assert (rows["api"].rate_limit, rows["api"].rate_burst, rows["api"].scale_limit) == (
        3.0,
        2,
        None,
    )
    assert rows["infer"].to_dict()["scale_limit"] == 1
    workers = {w.id: w for w in stats.workers(conn, SCHEMA)}
    assert workers["w-a"].warm_key == "model-a" and workers["w-a"].stop_requested
    assert not workers["w-b"].stop_requested and workers["w-b"].warm_key is None
    doc = workers["w-a"].to_dict()
    assert doc["stop_requested"] is True and doc["warm_key"] == "model-a"
    assert isinstance(doc["stop_requested_at"], str)


# -- the CLI -----------------------------------------------------------------------


def test_cli_scale_and_rate(dsn: str, conn) -> None:
    out = queue_ctl("--dsn", dsn, "scale", "infer", "4")
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout.strip() == "queue infer scaled to 4 workers (was: no limit)"
    same = queue_ctl("--dsn", dsn, "scale", "infer", "4")
    assert same.returncode == 0 and "already had scale limit 4 workers" in same.stdout
    zero = queue_ctl("--dsn", dsn, "scale", "infer", "0")
    assert zero.returncode == 0 and "scaled to 0 workers (was: 4 workers)" in zero.stdout
    off = queue_ctl("--dsn", dsn, "scale", "infer", "off")
    assert off.returncode == 0 and "scale limit removed (was: 0 workers)" in off.stdout
    off_again = queue_ctl("--dsn", dsn, "scale", "infer", "off")
    assert off_again.returncode == 0 and "already had no scale limit" in off_again.stdout
    assert queue_row(conn, "infer") == (None, None, 1, None, False)

    rate = queue_ctl("--dsn", dsn, "rate", "api", "2.5", "--burst", "5")
    assert (rate.returncode, rate.stderr) == (0, "")
    assert "rate limited to 2.5 jobs/s, burst 5 (was: no limit)" in rate.stdout
    same_rate = queue_ctl("--dsn", dsn, "rate", "api", "2.5", "--burst", "5")
    assert "already had rate limit 2.5 jobs/s, burst 5" in same_rate.stdout
    assert queue_row(conn, "api") == (None, 2.5, 5, None, True)
    rate_off = queue_ctl("--dsn", dsn, "rate", "api", "off")
    assert rate_off.returncode == 0
    assert "rate limit removed (was: 2.5 jobs/s, burst 5)" in rate_off.stdout

    scale_queue(conn, SCHEMA, "infer", 2)
    rate_queue(conn, SCHEMA, "api", 7, burst=3)
    doc = json.loads(queue_ctl("--dsn", dsn, "stats", "--json").stdout)
    by_queue = {q["queue"]: q for q in doc["queues"]}
    assert by_queue["infer"]["scale_limit"] == 2 and by_queue["infer"]["rate_limit"] is None
    assert (by_queue["api"]["rate_limit"], by_queue["api"]["rate_burst"]) == (7.0, 3)
    assert "scale_limit" in doc["definitions"]
    table = queue_ctl("--dsn", dsn, "stats").stdout.splitlines()
    header = table[0]
    assert "SCALE" in header and "RATE" in header and header.split()[-1] == "PAUSED"
    api_line = next(line for line in table if line.startswith("api"))
    assert "7/s x3" in api_line


def test_cli_park_unpark_stop_and_controls(dsn: str, conn) -> None:
    fleet(conn)
    parked = queue_ctl("--dsn", dsn, "park", "--host", "gpu-1", "--queue", "infer")
    assert (parked.returncode, parked.stderr) == (0, "")
    assert "parked host gpu-1, queue infer: matches 2 live workers (w-a, w-b) now" in parked.stdout
    assert "also holds for workers started on gpu-1 later" in parked.stdout
    again = queue_ctl("--dsn", dsn, "park", "--host", "gpu-1", "--queue", "infer")
    assert again.returncode == 0 and "was already parked (since " in again.stdout
    all_queues = queue_ctl("--dsn", dsn, "park", "--host", "gpu-1")
    assert all_queues.returncode == 0 and "host gpu-1 (all queues)" in all_queues.stdout
    by_id = queue_ctl("--dsn", dsn, "park", "--worker", "w-other")
    assert by_id.returncode == 0
    assert by_id.stdout.startswith("parked worker w-other (host gpu-2, queue infer)")
    assert parks(conn) == [("w-other", None, None), (None, "gpu-1", None), (None, "gpu-1", "infer")]

    text = queue_ctl("--dsn", dsn, "controls")
    assert text.returncode == 0 and "PARKS" in text.stdout and "host gpu-1" in text.stdout
    doc = json.loads(queue_ctl("--dsn", dsn, "controls", "--json").stdout)
    assert len(doc["parks"]) == 3 and doc["stops"] == [] and doc["queues"] == []

    one = queue_ctl("--dsn", dsn, "unpark", "--host", "gpu-1", "--queue", "infer")
    assert one.returncode == 0
    assert "unparked host gpu-1: removed 1 park(s) (queue infer)" in one.stdout
    assert "still parked for all queues" in one.stdout and "the workers of infer" in one.stdout
    rest = queue_ctl("--dsn", dsn, "unpark", "--host", "gpu-1")
    assert rest.returncode == 0 and "removed 1 park(s) (all queues)" in rest.stdout
    nothing = queue_ctl("--dsn", dsn, "unpark", "--host", "gpu-1")
    assert nothing.returncode == 0 and "was not parked" in nothing.stdout
    worker = queue_ctl("--dsn", dsn, "unpark", "--worker", "w-other")
    assert (worker.returncode, worker.stdout.strip()) == (0, "unparked worker w-other")
    assert parks(conn) == []

    stop = queue_ctl("--dsn", dsn, "stop", "--host", "gpu-1", "--queue", "infer")
    assert (stop.returncode, stop.stderr) == (0, "")
    assert stop.stdout.startswith("stop requested for 2 workers: w-a, w-b")
    stop_again = queue_ctl("--dsn", dsn, "stop", "--worker", "w-a")
    assert stop_again.returncode == 0 and "w-a was already asked to stop" in stop_again.stdout
    assert {w for w, asked in stop_flags(conn).items() if asked} == {"w-a", "w-b"}
    doc = json.loads(queue_ctl("--dsn", dsn, "controls", "--json").stdout)
    assert [s["worker_id"] for s in doc["stops"]] == ["w-a", "w-b"]

    workers = {w["id"]: w for w in json.loads(queue_ctl("--dsn", dsn, "workers", "--json").stdout)}
    assert workers["w-a"]["stop_requested"] and workers["w-a"]["warm_key"] == "model-a"
    assert not workers["w-etl"]["stop_requested"]
    lines = queue_ctl("--dsn", dsn, "workers").stdout.splitlines()
    assert "WARM" in lines[0]
    w_a = next(line for line in lines if line.startswith("w-a "))
    assert "model-a" in w_a and "(stop requested)" in w_a
    top = queue_ctl("--dsn", dsn, "top", "--iterations", "1")
    assert top.returncode == 0 and "(stop requested)" in top.stdout


def test_cli_unknown_or_gone_workers_exit_1(dsn: str, conn) -> None:
    fleet(conn)
    for args in (
        ("park", "--worker", "ghost"),
        ("park", "--worker", "w-stopped"),
        ("stop", "--worker", "ghost"),
        ("stop", "--host", "nowhere"),
        ("unpark", "--worker", "ghost"),
    ):
        line = one_line_error(queue_ctl("--dsn", dsn, *args), 1)
        assert "no live worker" in line or "no worker with id" in line
    assert parks(conn) == []
    assert not any(stop_flags(conn).values())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("scale", "infer", "-1"), "off"),
        (("scale", "infer", "1.5"), "whole number"),
        (("scale", "infer", "10001"), "10000"),
        (("scale", "infer", "unlimited"), "`off`"),
        (("scale", "bad queue", "1"), "invalid queue name"),
        (("scale", "infer"), "Missing argument"),
        (("rate", "api", "0"), "more than 0"),
        (("rate", "api", "-3"), "more than 0"),
        (("rate", "api", "nan"), "rate"),
        (("rate", "api", "5", "--burst", "0"), "burst"),
        (("rate", "api", "5", "--burst", "two"), "burst"),
        (("rate", "api", "off", "--burst", "2"), "--burst goes with a rate"),
        (("park",), "say which workers"),
        (("park", "--queue", "infer"), "scale infer 0"),
        (("stop", "--queue", "infer"), "pause infer"),
        (("unpark", "--host", "h", "--worker", "w"), "not both"),
        (("park", "--worker", "w", "--queue", "infer"), "--queue goes with --host"),
        (("stop", "--host", "a b"), "invalid host"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(dsn: str, args: tuple[str, ...], needle: str) -> None:
    # An unreachable DSN: validation happens before connecting, so it never matters.
    line = one_line_error(queue_ctl("--dsn", "postgresql://nobody@127.0.0.1:1/none", *args), 2)
    assert needle in line, line


def test_cli_needs_schema_version_4(dsn: str) -> None:
    Migrator(dsn).down(3)
    for args in (
        ("scale", "infer", "2"),
        ("rate", "api", "1"),
        ("park", "--host", "h"),
        ("stop", "--host", "h"),
        ("controls",),
    ):
        line = one_line_error(queue_ctl("--dsn", dsn, *args), 3)
        assert "queue-ctl migrate" in line
