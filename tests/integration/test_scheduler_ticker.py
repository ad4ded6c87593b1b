"""Contract: the ticker enqueues each due slot exactly once, on real Postgres, with a virtual clock.

``Ticker.run_once(now)`` acts on the slots in (cursor, now]: on-time slots are
enqueued with ``_schedule`` = {schedule, slot, reason} in their args; slots older
than the grace period are skipped and logged (default) or the ``catchup`` newest
are enqueued oldest first; ``overlap="skip"`` records a slot as skipped while the
previous job is queued or running; ``run-now`` enqueues a manual job outside the
slot ledger; two tickers racing the same slots enqueue each exactly once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from support.scheduler import make_ticker

from queue_engine.producer.schedules import ScheduleSpec
from queue_engine.scheduler import store
from queue_engine.scheduler.ticker import Ticker

__all__ = ["make_ticker"]  # a fixture: imported so that pytest finds it here

SCHEMA = "queue_engine"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
Conn = psycopg.Connection[Any]


def add(
    conn: Conn, name: str, expression: str, *, since: datetime = T0, **options: Any
) -> ScheduleSpec:
    """Add a CLI schedule whose cursor starts at ``since`` (a virtual time)."""
    spec = ScheduleSpec(
        name=name, expression=expression, task=options.pop("task", "tick"), **options
    )
    store.add(conn, SCHEMA, spec)
    conn.execute(
        "UPDATE queue_engine.schedules SET checked_until = %s WHERE name = %s", (since, name)
    )
    return spec


def scheduled_jobs(conn: Conn, name: str) -> list[tuple[int, str, str]]:
    """(id, slot, reason) of the jobs a schedule produced, oldest first."""
    rows = conn.execute(
        "SELECT id, args->'_schedule'->>'slot', args->'_schedule'->>'reason' FROM queue_engine.jobs "
        "WHERE args->'_schedule'->>'schedule' = %s ORDER BY id",
        (name,),
    ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]


def iso(t: datetime) -> str:
    return t.isoformat()


def test_on_time_slot_is_enqueued_once_with_its_reason(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "every10", "every 10s", queue="ingest", args={"source": "cbr"})
    ticker = make_ticker()
    assert ticker.run_once(T0 + timedelta(seconds=5)).enqueued == []
    result = ticker.run_once(T0 + timedelta(seconds=10, milliseconds=3))
    assert [(f.schedule, f.slot) for f in result.enqueued] == [
        ("every10", T0 + timedelta(seconds=10))
    ]
    assert result.next_wake == T0 + timedelta(seconds=20)
    assert ticker.run_once(T0 + timedelta(seconds=11)).enqueued == []  # the cursor moved
    job = conn.execute(
        "SELECT queue, task, args, producer FROM queue_engine.jobs WHERE id = %s",
        (result.enqueued[0].job_id,),
    ).fetchone()
    assert job is not None
    assert job[0:2] == ("ingest", "tick")
    assert job[2] == {
        "source": "cbr",
        "_schedule": {
            "schedule": "every10",
            "slot": "2026-06-01T12:00:10+00:00",
            "reason": "schedule",
        },
    }
    assert job[3] == "queue-scheduler"
    run = conn.execute(
        "SELECT outcome, job_id, scheduler_id FROM queue_engine.schedule_runs WHERE schedule = 'every10'"
    ).fetchall()
    assert run == [("enqueued", result.enqueued[0].job_id, "ticker-1")]
    row = store.list_rows(conn, SCHEMA)[0][0]
    assert row.last_slot == T0 + timedelta(seconds=10)
    assert row.last_job_id == result.enqueued[0].job_id


def test_slot_in_schedule_time_zone_is_reported_in_local_time(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "moscow", "0 15 * * *", tz="Europe/Moscow", since=T0 - timedelta(minutes=1))
    result = make_ticker().run_once(T0 + timedelta(seconds=30))  # 15:00 MSK = 12:00 UTC
    assert [f.slot for f in result.enqueued] == [T0]
    assert scheduled_jobs(conn, "moscow") == [
        (result.enqueued[0].job_id, "2026-06-01T15:00:00+03:00", "schedule")
    ]


def test_missed_slots_are_skipped_by_default(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "five", "*/5 * * * *")
    result = make_ticker(grace_s=60).run_once(T0 + timedelta(hours=1, seconds=2))
    # 12 slots were due; only the one within the grace period (13:00) is enqueued.
    assert [f.slot for f in result.enqueued] == [T0 + timedelta(hours=1)]
    assert result.missed == {"five": 11}
    assert [s for _, s, _ in scheduled_jobs(conn, "five")] == ["2026-06-01T13:00:00+00:00"]


def test_catchup_enqueues_the_newest_missed_slots_oldest_first(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "five", "*/5 * * * *", catchup=3)
    result = make_ticker(grace_s=60).run_once(T0 + timedelta(hours=1, seconds=2))
    minutes = [45, 50, 55, 60]
    assert [f.slot for f in result.enqueued] == [T0 + timedelta(minutes=m) for m in minutes]
    assert result.missed == {"five": 8}
    jobs = scheduled_jobs(conn, "five")
    assert [s for _, s, _ in jobs] == [iso(T0 + timedelta(minutes=m)) for m in minutes]
    assert [i for i, _, _ in jobs] == sorted(i for i, _, _ in jobs)  # enqueued oldest first


def test_catchup_larger_than_the_gap_enqueues_every_missed_slot(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "five", "*/5 * * * *", catchup=100)
    result = make_ticker(grace_s=0).run_once(T0 + timedelta(minutes=20))
    assert len(result.enqueued) == 4
    assert result.missed == {}


def test_late_slots_within_grace_are_all_enqueued(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "secs", "every 1s")
    result = make_ticker(grace_s=30).run_once(T0 + timedelta(seconds=5, milliseconds=500))
    assert [f.slot for f in result.enqueued] == [T0 + timedelta(seconds=s) for s in range(1, 6)]


def test_overlap_skip_records_the_slot_while_the_previous_job_is_active(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "etl", "every 10s", overlap="skip")
    ticker = make_ticker()
    first = ticker.run_once(T0 + timedelta(seconds=10)).enqueued[0]
    skipped = ticker.run_once(T0 + timedelta(seconds=20))
    assert skipped.enqueued == []
    assert [(f.slot, f.job_id) for f in skipped.skipped] == [(T0 + timedelta(seconds=20), None)]
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (first.job_id,))
    assert ticker.run_once(T0 + timedelta(seconds=30)).skipped != []  # running counts too
    conn.execute("UPDATE queue_engine.jobs SET status = 'succeeded' WHERE id = %s", (first.job_id,))
    assert len(ticker.run_once(T0 + timedelta(seconds=40)).enqueued) == 1
    outcomes = conn.execute(
        "SELECT outcome, count(*) FROM queue_engine.schedule_runs GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert outcomes == [("enqueued", 2), ("skipped", 2)]


def test_overlap_allow_enqueues_while_the_previous_job_is_active(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "etl", "every 10s")
    ticker = make_ticker()
    ticker.run_once(T0 + timedelta(seconds=10))
    assert len(ticker.run_once(T0 + timedelta(seconds=20)).enqueued) == 1


def test_run_now_enqueues_a_manual_job_each_time(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "report", "0 6 * * *", args={"kind": "daily"})
    first = store.run_now(conn, SCHEMA, "report")
    second = store.run_now(conn, SCHEMA, "report")
    assert first != second
    args = conn.execute("SELECT args FROM queue_engine.jobs WHERE id = %s", (first,)).fetchone()
    assert args is not None
    assert args[0] == {
        "kind": "daily",
        "_schedule": {"schedule": "report", "slot": None, "reason": "manual"},
    }
    assert conn.execute("SELECT count(*) FROM queue_engine.schedule_runs").fetchone() == (0,)
    with pytest.raises(store.ScheduleNotFound, match="schedule 'nope' not found"):
        store.run_now(conn, SCHEMA, "nope")


def test_run_now_counts_for_overlap_skip(conn: Conn, make_ticker: Callable[..., Ticker]) -> None:
    add(conn, "etl", "every 10s", overlap="skip")
    store.run_now(conn, SCHEMA, "etl")
    result = make_ticker().run_once(T0 + timedelta(seconds=10))
    assert result.enqueued == [] and len(result.skipped) == 1


def test_disabled_schedules_do_not_fire_and_enabling_does_not_catch_up(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "secs", "every 1s", catchup=100)
    store.set_enabled(conn, SCHEMA, "secs", False)
    ticker = make_ticker()
    assert ticker.run_once(T0 + timedelta(seconds=30)).enqueued == []
    store.set_enabled(conn, SCHEMA, "secs", True)
    row = store.list_rows(conn, SCHEMA)[0][0]
    assert row.checked_until > T0 + timedelta(days=1)  # restarted at the database's now
    assert scheduled_jobs(conn, "secs") == []


def test_slot_ledger_primary_key_refuses_a_second_claim(conn: Conn) -> None:
    add(conn, "secs", "every 1s")
    slot = T0 + timedelta(seconds=1)
    assert store.claim_slot(conn, SCHEMA, "secs", slot, "enqueued", "a") is True
    assert store.claim_slot(conn, SCHEMA, "secs", slot, "enqueued", "b") is False


def test_two_tickers_racing_every_slot_enqueue_each_exactly_once(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "secs", "every 1s", overlap="allow")
    add(conn, "twos", "every 2s", overlap="skip")
    tickers = [make_ticker("ticker-a"), make_ticker("ticker-b"), make_ticker("ticker-c")]
    rounds = 40
    barrier = threading.Barrier(len(tickers))
    errors: list[BaseException] = []
    enqueued: list[int] = []

    def race(ticker: Ticker) -> None:
        try:
            for k in range(1, rounds + 1):
                barrier.wait()
                result = ticker.run_once(T0 + timedelta(seconds=k))
                enqueued.extend(f.job_id for f in result.enqueued if f.job_id is not None)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=race, args=(t,)) for t in tickers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    slots = [s for _, s, _ in scheduled_jobs(conn, "secs")]
    assert slots == [iso(T0 + timedelta(seconds=k)) for k in range(1, rounds + 1)]
    assert len(enqueued) == len(set(enqueued))
    dupes = conn.execute(
        "SELECT args->'_schedule'->>'schedule', args->'_schedule'->>'slot' FROM queue_engine.jobs "
        "GROUP BY 1, 2 HAVING count(*) > 1"
    ).fetchall()
    assert dupes == []
    # overlap=skip with nobody running the jobs: only the first slot is enqueued.
    assert len(scheduled_jobs(conn, "twos")) == 1
    assert conn.execute(
        "SELECT count(*) FROM queue_engine.schedule_runs WHERE schedule = 'twos'"
    ).fetchone() == (rounds // 2,)


def test_next_wake_is_the_earliest_next_slot_across_schedules(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "hourly", "0 * * * *")
    add(conn, "quarter", "*/15 * * * *")
    add(conn, "off", "every 1s", enabled=False)
    result = make_ticker().run_once(T0 + timedelta(minutes=1))
    assert result.schedules == 2
    assert result.next_wake == T0 + timedelta(minutes=15)
    assert result.enqueued == []


def test_code_sync_upserts_keeps_operator_enable_and_removes_stale(conn: Conn) -> None:
    a = ScheduleSpec(name="a", expression="every 5m", task="ta", source="code")
    b = ScheduleSpec(name="b", expression="0 3 * * *", task="tb", source="code", tz="Europe/Berlin")
    first = store.sync_code(conn, SCHEMA, [a, b], app="app1")
    assert (sorted(first.created), first.updated, first.removed) == (["a", "b"], [], [])
    store.set_enabled(conn, SCHEMA, "a", False)
    again = store.sync_code(conn, SCHEMA, [a, b], app="app1")
    assert again == store.SyncResult([], [], [])
    changed = ScheduleSpec(name="a", expression="every 10m", task="ta", source="code")
    third = store.sync_code(conn, SCHEMA, [changed], app="app1")
    assert (third.created, third.updated, third.removed) == ([], ["a"], ["b"])
    rows = {r.name: r for r in store.list_rows(conn, SCHEMA)[0]}
    assert set(rows) == {"a"}
    assert rows["a"].spec.enabled is False and rows["a"].spec.expression == "every 10m"
    assert rows["a"].spec.source == "code" and rows["a"].app == "app1"
    # Another app's sync leaves app1's schedules alone.
    store.sync_code(conn, SCHEMA, [], app="app2")
    assert [r.name for r in store.list_rows(conn, SCHEMA)[0]] == ["a"]


def test_cli_cannot_replace_a_code_schedule_and_add_refuses_duplicates(conn: Conn) -> None:
    store.sync_code(
        conn,
        SCHEMA,
        [ScheduleSpec(name="a", expression="every 5m", task="t", source="code")],
        app="m",
    )
    with pytest.raises(store.ScheduleExists, match="declared in code"):
        store.add(
            conn, SCHEMA, ScheduleSpec(name="a", expression="every 1m", task="t"), replace=True
        )
    with pytest.raises(store.ScheduleExists, match="already exists"):
        store.add(conn, SCHEMA, ScheduleSpec(name="a", expression="every 1m", task="t"))


def test_changes_notify_the_schedules_channel(dsn: str, conn: Conn) -> None:
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute('LISTEN "queue_engine.schedules"')
        add(conn, "x", "every 1m")
        store.set_enabled(conn, SCHEMA, "x", False)
        store.remove(conn, SCHEMA, "x")
        got = [n.payload for n in listener.notifies(timeout=5, stop_after=3)]
    assert got == ["x", "x", "x"]


def test_stored_schedule_that_no_longer_validates_is_reported_not_fatal(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(conn, "good", "every 10s")
    conn.execute(
        "INSERT INTO queue_engine.schedules (name, expression, task, checked_until) "
        "VALUES ('bad', '* * * 13 *', 't', %s)",
        (T0,),
    )
    rows, broken = store.list_rows(conn, SCHEMA)
    assert [r.name for r in rows] == ["good"]
    assert broken and "month field '13' out of range 1-12" in broken[0]
    assert len(make_ticker().run_once(T0 + timedelta(seconds=10)).enqueued) == 1


def test_a_schedule_that_fails_to_enqueue_does_not_hold_up_the_others(
    conn: Conn, make_ticker: Callable[..., Ticker]
) -> None:
    add(
        conn, "huge", "every 10s", args={"blob": "x" * (1024 * 1024 - 20)}
    )  # over the limit with _schedule
    add(conn, "fine", "every 10s")
    result = make_ticker().run_once(T0 + timedelta(seconds=10))
    assert result.failed == ["huge"]
    assert [f.schedule for f in result.enqueued] == ["fine"]
    assert scheduled_jobs(conn, "huge") == []
    assert conn.execute(
        "SELECT count(*) FROM queue_engine.schedule_runs WHERE schedule = 'huge'"
    ).fetchone() == (0,)
