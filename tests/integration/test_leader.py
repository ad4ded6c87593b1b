"""Contract of ``LeaderElector.run_once`` on a real database, without threads.

Of two electors on one schema the first to try leads and the second stands by;
the leader's check confirms it still holds the lock; ``resign`` releases it and
the standby's next try wins; a leader whose session is cut steps down at its
next round (``on_demoted`` runs) and leads again once it reconnects; electors
of different schemas do not compete. Callbacks run exactly on role changes.
"""

from __future__ import annotations

from typing import Any

from queue_engine.daemon.service import Timing
from queue_engine.orchestrator.leader import LeaderElector, leader_key


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def elector(self, dsn: str, name: str, schema: str = "queue_engine") -> LeaderElector:
        return LeaderElector(
            dsn,
            schema,
            on_elected=lambda: self.calls.append(f"{name}+"),
            on_demoted=lambda: self.calls.append(f"{name}-"),
            timing=Timing(rand=lambda: 0.5),  # the backoff's jitter at its middle: no jitter
        )


def holder_pids(conn: Any, schema: str = "queue_engine") -> list[int]:
    rows = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
        "AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0)",
        (leader_key(schema),),
    ).fetchall()
    return [r[0] for r in rows]


def test_one_leader_then_hand_over_on_resign(dsn: str, conn) -> None:
    rec = Recorder()
    a, b = rec.elector(dsn, "a"), rec.elector(dsn, "b")
    try:
        first = a.run_once()
        assert first.leader and first.changed
        second = b.run_once()
        assert not second.leader and not second.changed
        assert a.run_once().leader  # confirmed, no change
        assert not b.run_once().leader
        assert rec.calls == ["a+"]
        assert len(holder_pids(conn)) == 1

        a.resign()
        assert rec.calls == ["a+", "a-"]
        assert holder_pids(conn) == []
        took = b.run_once()
        assert took.leader and took.changed
        assert rec.calls == ["a+", "a-", "b+"]
        assert not a.run_once().leader
    finally:
        a.resign()
        b.resign()


def test_leader_whose_session_is_cut_steps_down_and_leads_again(dsn: str, conn) -> None:
    rec = Recorder()
    a = rec.elector(dsn, "a")
    try:
        assert a.run_once().leader
        (pid,) = holder_pids(conn)
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        lost = a.run_once()
        assert not lost.leader and lost.changed and lost.error
        assert rec.calls == ["a+", "a-"]
        assert a.connection_failures == 1
        assert a.next_interval(lost) == a.interval_s  # first retry: no extra backoff yet
        again = a.run_once()  # reconnects and competes like a standby
        assert again.leader and again.changed
        assert rec.calls == ["a+", "a-", "a+"]
        assert a.connection_failures == 0
    finally:
        a.resign()


def test_reconnect_backoff_is_capped(dsn: str) -> None:
    a = LeaderElector(
        "postgresql://postgres@/postgres?host=/nonexistent&port=1",
        "queue_engine",
        timing=Timing(rand=lambda: 0.5),
    )
    a.backoff_max_s = 4.0
    waits = []
    for _ in range(5):
        result = a.run_once()
        assert not result.leader and result.error
        waits.append(a.next_interval(result))
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]
    # Jittered ±30 %, but never beyond the cap.
    a.timing = Timing(rand=lambda: 0.0)
    assert a.next_interval(result) == 0.7 * 4.0
    a.timing = Timing(rand=lambda: 1.0)
    assert a.next_interval(result) == 4.0


def test_schemas_have_separate_leaders(dsn: str, conn) -> None:
    rec = Recorder()
    a, b = rec.elector(dsn, "a"), rec.elector(dsn, "b", schema="other_engine")
    try:
        assert a.run_once().leader
        assert b.run_once().leader
    finally:
        a.resign()
        b.resign()
