"""One fake time for the unit tests: a clock that moves only when a test or a wait moves it.

Ten test modules had a fake clock of their own (a ``FakeTime``, a
``VirtualClock``, a ``FakeClock``, a ``Clock``), each with the same three
lines and its own small differences. This is the one: :class:`FakeTiming`
plays every part of :class:`queue_engine.daemon.service.Timing` (``clock``, ``wait``,
``rand``) and the plain ``sleep`` and ``clock`` the non-service code takes,
and :attr:`FakeTiming.timing` is the object a service or a daemon is given.

- the clock starts at ``now`` (1000 by default: a monotonic clock is never 0)
  and moves by :meth:`FakeTiming.advance`, :meth:`FakeTiming.sleep` and
  :meth:`FakeTiming.wait`; the instance itself is callable as a clock;
- every sleep and wait is recorded, in ``sleeps`` and ``waits``;
- ``wait(event, seconds)`` returns whether the event is set, as a real wait
  does, and then calls ``after_wait`` (a test that stops a service after its
  third wait sets it);
- ``rand()`` returns ``rand`` (0.5 by default: the middle of every jitter).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from queue_engine.daemon.service import Timing


class FakeTiming:
    """A virtual clock with recorded sleeps and waits, and a fixed random number."""

    def __init__(self, now: float = 1000.0, *, rand: float = 0.5) -> None:
        self.now = now
        self.rand_value = rand
        #: Seconds of every :meth:`sleep`, in order.
        self.sleeps: list[float] = []
        #: Seconds of every :meth:`wait`, in order.
        self.waits: list[float] = []
        #: Called after each wait is recorded (and the clock moved).
        self.after_wait: Callable[[], object] | None = None

    def clock(self) -> float:
        """The current virtual time."""
        return self.now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock."""
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        """Record the sleep and move the clock by it."""
        self.sleeps.append(seconds)
        self.now += seconds

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Record the wait, move the clock by it; True when the event is set."""
        self.waits.append(seconds)
        self.now += max(0.0, seconds)
        if self.after_wait is not None:
            self.after_wait()
        return event.is_set()

    def rand(self) -> float:
        """The fixed random number."""
        return self.rand_value

    @property
    def timing(self) -> Timing:
        """The :class:`~queue_engine.daemon.service.Timing` to give a service, a worker or a runtime."""
        return Timing(clock=self.clock, wait=self.wait, rand=self.rand)
