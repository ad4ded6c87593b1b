"""When a concurrency key's rate token is due: what the claim said, for the idle wait.

A job whose key's token bucket lacks its weight is skipped by the claim
(``concurrency_free`` in migrations/0033_rate_limits_per_key.sql), which then
raises a NOTICE ``queue-engine rate due S``: the token this job lacks is due in
S seconds (0: another claim of the key holds its lock right now). A notice
costs no round trip and no plan node, and a plain job never causes one.

The worker's connection hands every notice to :meth:`RateDue.on_notice`. When
a claim comes back empty, the main loop asks :meth:`RateDue.take` how long to
wait: the earliest due time the claim reported (floored so a contended key is
not polled in a tight loop), or None when no rated key held anything back (the
usual idle wait). So an idle worker facing a rated key sends about one claim
per token instead of polling, and wakes when the token is due instead of at
its next idle poll (seconds), which would let the measured rate sag.

Pure logic on times it is given: unit tests drive it with an injected clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

#: The notice's text, as the function raises it.
NOTICE = re.compile(r"queue-engine rate due (?P<s>[0-9]+(?:\.[0-9]*)?)")
#: The shortest wait (seconds): a key another claim holds is looked at again
#: this soon, and a due time already past is not a reason to spin.
MIN_WAIT_S = 0.005


class RateDue:
    """The earliest rate-token due time reported since the last :meth:`take`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        # No lock: notices come from the claim, which the main loop runs, and
        # clear() is on every claim's path (prefetch 1: every job's). A race
        # could only lose or keep one due time: one wait longer or shorter.
        self._due_at: float | None = None

    def note(self, seconds: float) -> None:
        """A claim skipped a job whose token is due in ``seconds``."""
        if not math.isfinite(seconds) or seconds < 0:
            return
        due = self._clock() + seconds
        if self._due_at is None or due < self._due_at:
            self._due_at = due

    def on_notice(self, message: str | None) -> None:
        """Handle one notice from the server; anything but a rate-due notice is ignored."""
        match = NOTICE.fullmatch(message or "")
        if match is not None:
            self.note(float(match["s"]))

    def clear(self) -> None:
        """Forget what earlier statements reported (before a claim)."""
        self._due_at = None

    def take(self, cap_s: float) -> float | None:
        """Seconds to wait for the earliest due token (at most ``cap_s``), then forget it.

        None when no claim since the last take or clear reported one.
        """
        due, self._due_at = self._due_at, None
        if due is None:
            return None
        return min(cap_s, max(MIN_WAIT_S, due - self._clock()))
