"""How long an idle worker waits between its safety polls.

An idle worker wakes on a NOTIFY naming its queue; the safety poll (a cheap
probe, ``sql/any_due_job.sql``) is for what no NOTIFY announces: a delayed
job (``available_at`` in the future) coming due, a job given back without
one. Every poll is a round trip that wakes a server process, and on a
database serving 200 idle workers that wake-up, not the probe, is the cost
(``bench/idle_fleet.py``: about 0.3 ms of server CPU per round trip, so one
poll a second per worker was 6-8 % of a core).

What a delayed job needs is that *someone* on its queue looks soon after it
is due, not that everyone does. So the probe also counts the queue's idle
workers, and each spaces its polls so that together they poll about
``QUEUE_ENGINE_QUEUE_POLL_RATE`` times a second: every ``idle / rate``
seconds, never more often than ``QUEUE_ENGINE_POLL_S`` (a small fleet polls
as before), never less often than :data:`IDLE_POLL_CAP_S`. The interval is
jittered (x 0.5-1.5, same mean) so the polls of a fleet that started together
spread out instead of arriving in bursts; with the phases spread, the queue
is polled like a Poisson stream of that rate, so a delayed job waits on
average ``1 / rate`` seconds past its due time (0.5 s by default, as
with one worker polling every second) and longer
than ``t`` with probability about ``exp(-rate * t)``. The worst case, one idle
worker left whose last count was high, is :data:`IDLE_POLL_CAP_S`.
"""

from __future__ import annotations

from collections.abc import Callable

#: The longest wait between two safety polls of one idle worker (seconds).
IDLE_POLL_CAP_S = 30.0


def poll_interval(
    poll_s: float,
    queue_poll_rate: float,
    idle_workers: int,
    rand: Callable[[], float],
) -> float:
    """Seconds until this idle worker's next safety poll.

    ``poll_s`` when ``queue_poll_rate`` is 0 (off) or the queue's
    ``idle_workers`` poll less than ``queue_poll_rate`` times a second at that
    pace; else ``idle_workers / queue_poll_rate`` times a jitter of 0.5-1.5
    (``rand()`` in [0, 1)), kept between ``poll_s`` and :data:`IDLE_POLL_CAP_S`.
    """
    if queue_poll_rate <= 0:
        return poll_s
    spaced = idle_workers / queue_poll_rate
    if spaced <= poll_s:
        return poll_s
    return max(poll_s, min(max(IDLE_POLL_CAP_S, poll_s), spaced * (0.5 + rand())))
