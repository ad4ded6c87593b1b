"""What code written for pqrun or dataloader needs to mean the same here.

Two of the systems queue-engine replaces differ from it in ways that no
setting can hide, because the difference is in the values an application
passes:

- **pqrun's priority runs the other way.** There, ``priority`` is any int,
  default 0, and *higher* runs first (``ORDER BY priority DESC``). Here it is
  0..1000, default 100, and *lower* runs first (as in the dataloader API).
  :func:`priority_from_pqrun` converts one to the other; the importer
  (``queue-ctl import --from pqrun``) and an application's own enqueues can
  use the same function, so a job moved over and a job enqueued after the
  switch are ordered alike.
- **Their retry delays.** pqrun's ``BackoffPolicy`` is :data:`PQRUN_RETRY`
  (1 min, 5 min, 30 min, 2 h, then 6 h) and dataloader's ``30 * attempt``
  seconds is :data:`DATALOADER_RETRY`; pass one to ``@task(retry=...)`` to
  keep the old timing (the engine's default is 1 s doubling to 1 h, ±10 %).

docs/guides/worker.md ("Coming from pqrun or dataloader") says the rest.
"""

from __future__ import annotations

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.retry import LinearBackoff, StepBackoff
from queue_engine.producer.validation import DEFAULT_PRIORITY, PRIORITY_RANGE

#: pqrun's ``BackoffPolicy()``: 1 min, 5 min, 30 min, 2 h, then 6 h for every later attempt.
PQRUN_RETRY = StepBackoff([60, 300, 1800, 7200, 21600])
#: dataloader's retry delay: ``30 * attempt`` seconds, no cap, no jitter.
DATALOADER_RETRY = LinearBackoff(30)
#: pqrun's default priority (higher runs first there).
PQRUN_DEFAULT_PRIORITY = 0


def priority_from_pqrun(priority: int) -> int:
    """The engine's priority for a pqrun priority: ``100 - priority``, kept within 0..1000.

    Order-preserving and default-preserving: pqrun's default 0 becomes our
    default 100, and a job that ran before another there runs before it here
    (pqrun 10 → 90, pqrun -5 → 105). pqrun allows any int, we allow 0..1000:
    pqrun priorities above 100 all become 0 and those below -900 all become
    1000, so jobs out there keep their place against every job inside that
    range but tie among themselves (the claim then takes them by id, oldest
    first, as pqrun did for equal priorities).
    """
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValidationError(f"a pqrun priority is an integer, got {priority!r}")
    low, high = PRIORITY_RANGE
    return min(high, max(low, DEFAULT_PRIORITY - (priority - PQRUN_DEFAULT_PRIORITY)))
