"""SIGTERM/SIGINT for every daemon: the first stops gracefully, a second exits 130 at once.

The first signal only sets the stop event; the main thread sees it and shuts
down in order (services in reverse, the workers row marked stopped). That
can take a while (a sweep finishing its batch, a job finishing within its
grace, a database that does not answer); an operator who sends a second
signal wants out now, so the second one logs ``<role>.exit_now`` and ends the
process with :data:`EXIT_INTERRUPTED` (130) without any further database
work. *Second* counts signals, not stop requests: a worker that stops itself
(a recycling limit, ``queue-ctl stop``) sets the same event, and the first
SIGTERM after that is still a graceful one. Whatever
the process held is recovered by the rest of the engine: a leader's advisory
lock is released with its session, a worker's job by fast recovery or its
lease.

``os._exit`` rather than ``sys.exit``: the handler runs on the main thread in
the middle of the shutdown code (a ``join``, a statement); raising there
would run ``finally`` blocks that wait again. The exit function is injected,
so the rule is unit-tested without ending the test process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType

from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.logs import log_event

#: Exit code of a second SIGTERM/SIGINT (128 + SIGINT, the shell's "interrupted").
EXIT_INTERRUPTED = ExitCode.INTERRUPTED
#: The roles whose stop signals this module handles (each logs ``<role>.exit_now``).
SIGNAL_ROLES = ("orchestrator", "scheduler", "worker", "web")
#: The signals that ask a daemon to stop.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """The stop event set by the first signal; the exit called on the second."""

    def __init__(
        self,
        role: str,
        *,
        on_first: Callable[[], None] | None = None,
        exit: Callable[[int], object] = os._exit,
        logger: logging.Logger | None = None,
        event: threading.Event | None = None,
    ) -> None:
        """``on_first`` runs once, after the event is set; ``event``: one the daemon already waits on."""
        self.role = role
        self.event = event if event is not None else threading.Event()
        self.on_first = on_first
        self.exit = exit
        self.log = logger or logging.getLogger(f"queue_engine.{role}")
        self._signalled = False

    @property
    def stop_requested(self) -> bool:
        """True once a stop was asked for (by a signal or :meth:`request_stop`)."""
        return self.event.is_set()

    def request_stop(self) -> None:
        """What the first signal does; also callable directly (tests, an embedding program)."""
        first = not self.event.is_set()
        self.event.set()
        if first and self.on_first is not None:
            self.on_first()

    def handle(self, signum: int, _frame: FrameType | None = None) -> None:
        """The signal handler: graceful stop first, exit 130 on a repeat."""
        if not self._signalled:
            self._signalled = True
            self.request_stop()
            return
        # Second signal: no database work, nothing that can block.
        log_event(
            self.log,
            logging.WARNING,
            f"{self.role}.exit_now",
            signal=signal.Signals(signum).name,
            exit_code=EXIT_INTERRUPTED,
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        self.exit(EXIT_INTERRUPTED)

    def install(self, signals: Iterable[signal.Signals] = STOP_SIGNALS) -> None:
        """Route the stop signals here (main thread only, as Python requires)."""
        for signum in signals:
            signal.signal(signum, self.handle)
