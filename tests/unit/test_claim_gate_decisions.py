"""The claim gate's decisions (``worker/gate.py``), against a fake of its store interface.

The fake answers what ``worker_controls.sql`` and the scale-slot statements
would: it is a stand-in for three calls, not a second implementation of the
SQL (the statements themselves are tested against Postgres in
``tests/integration/test_claim_gate.py`` and ``test_worker_controls.py``).
Times are passed in: nothing sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from queue_engine.worker.gate import IDLE_CONTROLS_S, Gate, GateStep
from queue_engine.worker.store import WorkerControls


@dataclass
class FakeGateStore:
    """Controls as an operator set them, and which scale slots other workers hold."""

    controls: WorkerControls = field(default_factory=WorkerControls)
    held_by_others: set[int] = field(default_factory=set)
    mine: set[int] = field(default_factory=set)
    reads: int = 0
    calls: list[str] = field(default_factory=list)

    def read_controls(self) -> WorkerControls:
        self.reads += 1
        return self.controls

    def take_scale_slot(self, limit: int) -> int | None:
        free = [s for s in range(limit) if s not in self.held_by_others | self.mine]
        if not free:
            return None
        self.mine.add(free[0])
        self.calls.append(f"take {free[0]}")
        return free[0]

    def release_scale_slot(self, slot: int) -> None:
        self.mine.discard(slot)
        self.calls.append(f"release {slot}")


def make_gate(store: FakeGateStore, **kwargs: object) -> Gate:
    options: dict[str, object] = {
        "worker_id": "w1",
        "queue": "q",
        "host": "h",
        "poll_s": 1.0,
        "heartbeat_s": 10.0,
    }
    options.update(kwargs)
    return Gate(store, **options)  # type: ignore[arg-type]


def never() -> None:
    raise AssertionError("no pending finishes should be written here")


def test_reads_the_controls_first_then_once_per_heartbeat_period_or_when_told() -> None:
    store = FakeGateStore()
    gate = make_gate(store)
    assert gate.refresh(0.0, before_release=never) == GateStep()
    assert store.reads == 1
    gate.refresh(9.9, before_release=never)
    assert store.reads == 1  # within the period: the copy is used
    gate.refresh(10.0, before_release=never)
    assert store.reads == 2
    gate.mark_dirty()  # a NOTIFY on the controls channel
    gate.refresh(10.1, before_release=never)
    assert store.reads == 3
    gate.session_lost()  # a reconnect: read again
    gate.refresh(10.2, before_release=never)
    assert store.reads == 4


def test_an_idle_worker_re_reads_its_controls_every_minute_unless_told() -> None:
    """Back from a safety poll that found nothing, the periodic re-read waits
    IDLE_CONTROLS_S (the claim enforces the controls, and a change NOTIFYs);
    a NOTIFY still makes it read at once."""
    store = FakeGateStore()
    gate = make_gate(store)
    gate.refresh(0.0, before_release=never, idle=True)
    assert store.reads == 1
    gate.refresh(30.0, before_release=never, idle=True)
    assert store.reads == 1
    gate.refresh(IDLE_CONTROLS_S, before_release=never, idle=True)
    assert store.reads == 2
    gate.mark_dirty()
    gate.refresh(IDLE_CONTROLS_S + 1, before_release=never, idle=True)
    assert store.reads == 3
    # Busy again: the heartbeat period.
    gate.refresh(IDLE_CONTROLS_S + 11, before_release=never)
    assert store.reads == 4


def test_no_controls_means_claim_freely() -> None:
    gate = make_gate(FakeGateStore())
    gate.refresh(0.0, before_release=never)
    assert gate.may_claim() and gate.parked is None and gate.slot is None
    assert gate.state(busy=False, stopping=False) == "idle"


def test_pause_stops_claiming_without_parking() -> None:
    gate = make_gate(FakeGateStore(WorkerControls(paused=True)))
    assert gate.refresh(0.0, before_release=never) == GateStep()
    assert not gate.may_claim()
    assert gate.parked is None


def test_park_parks_and_unpark_unparks() -> None:
    store = FakeGateStore(WorkerControls(parked=True))
    gate = make_gate(store)
    assert gate.refresh(0.0, before_release=never) == GateStep(parked=True)
    assert gate.parked == "park" and not gate.may_claim()
    assert gate.state(busy=False, stopping=False) == "parked"
    assert gate.refresh(10.0, before_release=never) == GateStep()  # still parked: no new step
    store.controls = WorkerControls()
    gate.mark_dirty()
    assert gate.refresh(10.5, before_release=never) == GateStep()
    assert gate.parked is None and gate.may_claim()


def test_stop_request_asks_the_worker_to_stop_before_anything_else() -> None:
    store = FakeGateStore(WorkerControls(stop_requested=True, scale_limit=1))
    gate = make_gate(store)
    assert gate.refresh(0.0, before_release=never) == GateStep(stop=True)
    assert store.calls == []  # no slot taken on the way out


def test_a_scale_limit_takes_the_lowest_free_slot() -> None:
    store = FakeGateStore(WorkerControls(scale_limit=3), held_by_others={0})
    gate = make_gate(store)
    assert gate.refresh(0.0, before_release=never) == GateStep()
    assert gate.slot == 1 and gate.may_claim()
    assert gate.claim_gate().slot == 1


def test_no_free_slot_parks_for_scale_and_looks_again_every_poll() -> None:
    store = FakeGateStore(WorkerControls(scale_limit=2), held_by_others={0, 1})
    gate = make_gate(store, poll_s=1.0, heartbeat_s=10.0)
    assert gate.refresh(0.0, before_release=never) == GateStep(parked=True)
    assert gate.parked == "scale" and gate.slot is None and not gate.may_claim()
    # A freed slot sends no notification: parked for scale, the gate looks every poll.
    assert not gate.due(0.9) and gate.due(1.0)
    store.held_by_others = {0}
    assert gate.refresh(1.0, before_release=never) == GateStep()
    assert gate.slot == 1 and gate.parked is None


def test_a_slot_above_a_lowered_limit_is_given_up_after_the_pending_finishes() -> None:
    store = FakeGateStore(WorkerControls(scale_limit=3), held_by_others={0, 1})
    gate = make_gate(store)
    gate.refresh(0.0, before_release=never)
    assert gate.slot == 2
    store.controls = WorkerControls(scale_limit=2)
    gate.mark_dirty()
    flushed: list[list[str]] = []
    step = gate.refresh(0.1, before_release=lambda: flushed.append(list(store.calls)))
    # The pending finishes were written while the slot was still held, then it went.
    assert flushed == [["take 2"]]
    assert store.calls == ["take 2", "release 2"]
    assert step == GateStep(parked=True) and gate.parked == "scale"


def test_removing_the_limit_gives_the_slot_back_and_claims_freely() -> None:
    store = FakeGateStore(WorkerControls(scale_limit=1))
    gate = make_gate(store)
    gate.refresh(0.0, before_release=never)
    assert gate.slot == 0
    store.controls = WorkerControls()
    gate.mark_dirty()
    released: list[bool] = []
    gate.refresh(0.1, before_release=lambda: released.append(True))
    assert released == [True] and gate.slot is None and store.mine == set()
    assert gate.may_claim()


def test_a_new_session_forgets_the_slot_and_takes_one_again() -> None:
    store = FakeGateStore(WorkerControls(scale_limit=2))
    gate = make_gate(store)
    gate.refresh(0.0, before_release=never)
    assert gate.slot == 0
    store.mine.clear()  # the session lock died with the old session
    gate.session_lost()
    assert gate.slot is None
    gate.refresh(0.1, before_release=never)
    assert gate.slot == 0 and store.calls == ["take 0", "take 0"]


@pytest.mark.parametrize(
    ("rate", "poll_s", "expected"),
    [(10.0, 1.0, 0.1), (0.5, 1.0, 1.0), (10_000.0, 1.0, 0.005), (10.0, 0.05, 0.05)],
)
def test_rate_wait_is_one_token_clamped_to_the_poll(
    rate: float, poll_s: float, expected: float
) -> None:
    gate = make_gate(FakeGateStore(WorkerControls(rate_limit=rate)), poll_s=poll_s)
    gate.refresh(0.0, before_release=never)
    assert gate.rate_wait_s() == pytest.approx(expected)


def test_throttled_with_no_known_rate_rereads_the_controls_soon() -> None:
    gate = make_gate(FakeGateStore())
    gate.refresh(0.0, before_release=never)
    gate.note_claim(throttled=True)
    assert gate.rate_wait_s() == pytest.approx(0.1)
    assert gate.due(0.01)  # marked dirty: the next refresh reads the limit


def test_the_warm_key_follows_the_last_job_that_named_one() -> None:
    gate = make_gate(FakeGateStore(), warm_key="model-a", affinity_wait_s=3.0)
    assert gate.claim_gate().warm_key == "model-a"
    assert gate.claim_gate().affinity_wait_s == 3.0
    gate.warmed(None)  # a job without an affinity key changes nothing
    assert gate.warm_key == "model-a"
    gate.warmed("model-b")
    assert gate.claim_gate().warm_key == "model-b"


def test_the_shown_state_puts_stopping_before_busy_before_parked() -> None:
    gate = make_gate(FakeGateStore(WorkerControls(parked=True)))
    gate.refresh(0.0, before_release=never)
    assert gate.state(busy=True, stopping=True) == "stopping"
    assert gate.state(busy=True, stopping=False) == "busy"
    assert gate.state(busy=False, stopping=False) == "parked"
