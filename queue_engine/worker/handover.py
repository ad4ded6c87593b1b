"""Which workflow nodes' successes a worker sends with the hand-over.

The ``handover`` variant of the finish statement (``finish_and_claim_jobs.sql``)
may claim a child whose last pending parent is the node it finishes. It is
only worth its cost where that happens: Postgres initialises every node of a
generic plan at each execution, so the hand-over's CTEs cost about a seventh
of a wide fan-out part's statement even when they hand nothing over (the join
waits for the other parts), which on a 10,000-part fan is nearly every part
(bench/runs/2026-11-27-log.md, "workflow_cost.py"). The worker cannot see a node's
children before it finishes it, and asking the claim costs every plain job a
subquery's set-up; so each worker learns instead, per workflow and per
parents (a node's siblings, the nodes after the same parents, share a fate: a
fan's parts all wait for the same join, while each link of a chain has
parents of its own): after ``give_up_after`` hand-over attempts in a row that
handed nothing over, it sends those siblings' successes without the
hand-over, trying it again every ``probe_every``-th time (a fan-in's last
parts). A chain behind a fan is not held back by the fan's misses: its links
have other parents. A node whose child is then not handed over is queued by
the trigger and claimed as usual: this decides speed, never correctness.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from queue_engine.producer.context import ClaimedJob
from queue_engine.worker.outcomes import Outcome

#: Hand-overs in a row that handed nothing over before a sibling group's
#: successes are sent without it.
GIVE_UP_AFTER = 3
#: After giving up, every this-many-th success of the siblings tries again.
#: Only a fan-in's last parts gain by it (the join handed over, not woken by
#: its NOTIFY); each try costs a part's statement about a fifth more
#: (bench/runs/2026-11-27-log.md, "A node's end without the workflow row").
PROBE_EVERY = 128
#: Sibling groups remembered per worker (least recently seen forgotten first).
REMEMBER = 64


class HandoverPolicy:
    """Per worker: which workflow nodes' successes are worth the hand-over, by siblings."""

    def __init__(
        self,
        *,
        give_up_after: int = GIVE_UP_AFTER,
        probe_every: int = PROBE_EVERY,
        remember: int = REMEMBER,
    ) -> None:
        self.give_up_after = give_up_after
        self.probe_every = probe_every
        self.remember = remember
        #: (workflow id, siblings) -> hand-overs in a row that handed nothing over
        self._misses: OrderedDict[tuple[int, str], int] = OrderedDict()
        #: Workflow successes sent without the hand-over, since the start.
        self.sent_without = 0

    def misses(self, workflow_id: int, siblings: str = "") -> int:
        """Hand-overs in a row of those siblings that handed nothing over (0 when not seen)."""
        return self._misses.get((workflow_id, siblings), 0)

    def should_try(self, outcomes: Sequence[Outcome]) -> bool:
        """Whether this batch's statement should carry the hand-over."""
        for outcome in outcomes:
            workflow = outcome.workflow_id
            if workflow is None or outcome.status != "succeeded":
                continue
            misses = self._misses.get((workflow, outcome.siblings), 0)
            if misses < self.give_up_after:
                return True
            if (misses - self.give_up_after) % self.probe_every == self.probe_every - 1:
                return True
        return False

    def note(self, outcomes: Sequence[Outcome], tried: bool, claimed: Iterable[ClaimedJob]) -> None:
        """Count what a statement did for the sibling groups of the successes it carried.

        A statement sent without the hand-over counts as a miss too, so that
        the probe comes round every ``probe_every`` successes.
        """
        handed = {job.workflow_id for job in claimed if job.handed_over}
        for outcome in outcomes:
            workflow = outcome.workflow_id
            if workflow is None or outcome.status != "succeeded":
                continue
            if not tried:
                self.sent_without += 1
            key = (workflow, outcome.siblings)
            if tried and workflow in handed:
                self._misses[key] = 0
            else:
                self._misses[key] = self._misses.get(key, 0) + 1
            self._misses.move_to_end(key)
            if len(self._misses) > self.remember:
                self._misses.popitem(last=False)
