"""The worker's hand-over policy: which workflows' successes carry the hand-over (pure logic)."""

from __future__ import annotations

from datetime import UTC, datetime

from queue_engine.producer.context import ClaimedJob
from queue_engine.worker.handover import HandoverPolicy
from queue_engine.worker.outcomes import NAMED_PARENTS, Outcome, siblings_key


def success(job_id: int, workflow: int | None, siblings: str = "") -> Outcome:
    return Outcome(job_id, 1, "succeeded", "succeeded", workflow_id=workflow, siblings=siblings)


def child(job_id: int, workflow: int, handed_over: bool = True) -> ClaimedJob:
    return ClaimedJob(
        job_id,
        "q",
        "t",
        {},
        1,
        5,
        100,
        None,
        None,
        None,
        datetime.now(UTC),
        False,
        None,
        workflow,
        f"n{job_id}",
        {},
        handed_over,
    )


def test_a_new_workflow_is_tried_and_a_plain_job_never() -> None:
    policy = HandoverPolicy()
    assert policy.should_try([success(1, 7)])
    assert not policy.should_try([success(1, None)])
    failed = Outcome(1, 1, "failed", "failed", workflow_id=7)
    assert not policy.should_try([failed])


def test_misses_in_a_row_stop_the_tries_and_a_probe_comes_round() -> None:
    policy = HandoverPolicy(give_up_after=3, probe_every=4)
    tried = []
    for i in range(3 + 8):
        batch = [success(i, 7)]
        attempt = policy.should_try(batch)
        tried.append(attempt)
        policy.note(batch, attempt, [])
    # Three misses, then one try in every four: the fourth, the eighth.
    assert tried == [True, True, True, False, False, False, True, False, False, False, True]
    assert policy.sent_without == tried.count(False)


def test_a_hand_over_resets_the_count() -> None:
    policy = HandoverPolicy(give_up_after=2, probe_every=100)
    for i in range(2):
        policy.note([success(i, 7)], True, [])
    assert not policy.should_try([success(5, 7)])
    # The probe (or another workflow's statement) handed a child of 7 over.
    policy.note([success(6, 7)], True, [child(8, 7)])
    assert policy.should_try([success(9, 7)])
    # A child claimed from the queue, not handed over, is a miss.
    policy.note([success(9, 7)], True, [child(10, 7, handed_over=False)])
    policy.note([success(11, 7)], True, [])
    assert not policy.should_try([success(12, 7)])


def test_workflows_are_counted_apart_and_the_oldest_forgotten() -> None:
    policy = HandoverPolicy(give_up_after=1, probe_every=100, remember=2)
    policy.note([success(1, 7)], True, [])
    assert not policy.should_try([success(2, 7)])
    assert policy.should_try([success(3, 8)])
    policy.note([success(3, 8)], True, [])
    policy.note([success(4, 9)], True, [])  # 7 is forgotten: tried again
    assert policy.should_try([success(5, 7)])
    assert not policy.should_try([success(6, 9)])


def test_siblings_are_counted_apart_from_a_chain_in_the_same_workflow() -> None:
    """A fan's parts give the hand-over up; the chain behind the fan still gets it."""
    policy = HandoverPolicy(give_up_after=3, probe_every=100)
    for i in range(3):
        policy.note([success(i, 7, "root")], True, [])
    assert not policy.should_try([success(10, 7, "root")])
    assert policy.should_try([success(11, 7, "join")])  # the chain's first link
    policy.note([success(11, 7, "join")], True, [child(12, 7)])
    assert policy.should_try([success(12, 7, "c1")])
    assert policy.misses(7, "root") == 3 and policy.misses(7, "join") == 0


def test_a_nodes_siblings_key_is_its_parents_names_or_their_count() -> None:
    assert siblings_key(None) == siblings_key({}) == ""
    assert siblings_key({"b": {}, "a": {}}) == siblings_key({"a": {}, "b": {}}) == "a\x1fb"
    many = {f"p{i}": {} for i in range(NAMED_PARENTS + 1)}
    assert siblings_key(many) == f"#{NAMED_PARENTS + 1}"
