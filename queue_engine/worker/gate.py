"""The claim gate: whether, and as what, the worker may claim (operator controls).

The claim statement enforces pause, scale, park and the rate limit by itself
(``finish_and_claim_jobs.sql``); the gate keeps a copy of the controls
(re-read on a NOTIFY on ``<schema>.controls``, after a reconnect and once per
heartbeat period, or every poll while parked for want of a scale slot) to
know whether to claim at all, to take or give up a scale slot (a session
advisory lock: at most ``scale_limit`` workers of a queue hold one), to show
``parked``, to retry when a rate token is due, to hold the warm affinity key,
and to stop (exit 0) when an operator asks.

Its decisions depend only on what its :class:`GateStore` answers and on the
times it is given, so unit tests drive it with a small fake store;
:class:`DbGateStore` is the real one, on the worker's connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from queue_engine.foundation.logs import log_event
from queue_engine.worker import store
from queue_engine.worker.connection import WorkerConnection
from queue_engine.worker.settings import DEFAULT_AFFINITY_WAIT_S
from queue_engine.worker.store import WorkerControls

log = logging.getLogger("queue_engine.worker")

#: An idle worker re-reads its controls at most this often without a NOTIFY
#: (seconds): the claim enforces them anyway, every change sends a NOTIFY and a
#: reconnect re-reads them, so this only covers a notification lost otherwise,
#: and a big idle fleet's re-reads cost the database a round trip each.
IDLE_CONTROLS_S = 60.0
#: Shortest wait for a rate token before claiming again (seconds).
RATE_WAIT_MIN_S = 0.005
#: Why a worker does not claim, as logged with ``worker.parked``.
PARK_REASONS = {
    "park": "queue-ctl park names this worker or its host",
    "scale": "the queue's {limit} scale slots are all held",
}


class GateStore(Protocol):
    """The statements the gate needs (see :mod:`queue_engine.worker.store`)."""

    def read_controls(self) -> WorkerControls:
        """What the controls say about this worker now."""
        ...

    def take_scale_slot(self, limit: int) -> int | None:
        """The lowest free scale slot below ``limit``, now held; None when all are held."""
        ...

    def release_scale_slot(self, slot: int) -> None:
        """Give up a slot taken by :meth:`take_scale_slot`."""
        ...


class DbGateStore:
    """The gate's statements on the worker's connection (retried across reconnects)."""

    def __init__(self, connection: WorkerConnection, *, worker_id: str) -> None:
        self.connection = connection
        self.worker_id = worker_id

    def read_controls(self) -> WorkerControls:
        """Run ``worker_controls.sql``."""
        c = self.connection
        return c.run(
            lambda conn: store.read_controls(
                conn, c.schema, worker_id=self.worker_id, queue=c.queue, host=c.host
            )
        )

    def take_scale_slot(self, limit: int) -> int | None:
        """Run ``scale_slot_take.sql``."""
        c = self.connection
        return c.run(lambda conn: store.take_scale_slot(conn, c.schema, queue=c.queue, limit=limit))

    def release_scale_slot(self, slot: int) -> None:
        """Run ``scale_slot_release.sql``."""
        c = self.connection
        c.run(lambda conn: store.release_scale_slot(conn, c.schema, queue=c.queue, slot=slot))


@dataclass(frozen=True, slots=True)
class GateStep:
    """What a refresh asks of the worker: stop, or give back prefetched jobs (newly parked)."""

    stop: bool = False
    parked: bool = False


class Gate:
    """The worker's copy of its controls, its scale slot, park state, rate state, warm key."""

    def __init__(
        self,
        db: GateStore,
        *,
        worker_id: str,
        queue: str,
        host: str,
        poll_s: float,
        heartbeat_s: float,
        warm_key: str | None = None,
        affinity_wait_s: float = DEFAULT_AFFINITY_WAIT_S,
    ) -> None:
        self.db = db
        self.worker_id = worker_id
        self.queue = queue
        self.host = host
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.affinity_wait_s = affinity_wait_s
        self.controls = WorkerControls()
        self.dirty = True
        self.read_at: float | None = None
        #: The scale slot held (a session advisory lock), if any.
        self.slot: int | None = None
        #: Why this worker does not claim: "park", "scale", or None.
        self.parked: str | None = None
        #: The last claim found due jobs the rate limit withheld.
        self.throttled = False
        #: The affinity key the worker is warm for.
        self.warm_key = warm_key

    # -- events ---------------------------------------------------------------------

    def mark_dirty(self) -> None:
        """Re-read the controls at the next refresh (a NOTIFY on the controls channel)."""
        self.dirty = True

    def session_lost(self) -> None:
        """A new session: the slot (a session lock) died with the old one; controls may have changed."""
        self.slot = None
        self.dirty = True

    def note_claim(self, throttled: bool) -> None:
        """Record whether the last claim was held back by the rate limit."""
        self.throttled = throttled

    def warmed(self, key: str | None) -> None:
        """The job just run named ``key``: what it loaded, the worker now has warm."""
        if key is not None:
            self.warm_key = key

    # -- decisions ------------------------------------------------------------------

    def due(self, now: float, *, idle: bool = False) -> bool:
        """Whether to re-read the controls now.

        A slot that frees (its holder exited or died) sends no notification:
        a worker parked for want of one looks again at every poll. An idle
        worker looks every :data:`IDLE_CONTROLS_S` at the longest.
        """
        if self.parked == "scale":
            period = self.poll_s
        else:
            period = max(self.heartbeat_s, IDLE_CONTROLS_S) if idle else self.heartbeat_s
        return self.dirty or self.read_at is None or now - self.read_at >= period

    def refresh(
        self, now: float, *, before_release: Callable[[], None], idle: bool = False
    ) -> GateStep:
        """Re-read the controls if due and act on them; say what the worker must do.

        Called by the main loop between jobs only: a control never interrupts
        a running job. ``before_release`` runs before a scale slot is given
        up (the worker writes its pending finishes: they end jobs that ran
        under that slot, so a worker that takes the slot over never overlaps
        them).
        """
        if not self.due(now, idle=idle):
            return GateStep()
        self.dirty = False
        self.read_at = now
        previous = self.controls
        controls = self.controls = self.db.read_controls()
        if controls != previous:
            log_event(
                log,
                logging.DEBUG,
                "worker.controls_changed",
                worker_id=self.worker_id,
                queue=self.queue,
                paused=controls.paused,
                scale_limit=controls.scale_limit,
                rate_limit=controls.rate_limit,
                parked=controls.parked,
                stop_requested=controls.stop_requested,
            )
        if controls.stop_requested:
            log_event(
                log,
                logging.INFO,
                "worker.stop_requested",
                worker_id=self.worker_id,
                queue=self.queue,
                reason="queue-ctl stop: exiting 0 now that no job runs",
            )
            return GateStep(stop=True)
        self._fit_scale_slot(controls.scale_limit, before_release)
        reason = "park" if controls.parked else None
        if reason is None and controls.scale_limit is not None and self.slot is None:
            reason = "scale"
        if reason == self.parked:
            return GateStep()
        self.parked = reason
        log_event(
            log,
            logging.INFO,
            "worker.parked" if reason else "worker.unparked",
            worker_id=self.worker_id,
            queue=self.queue,
            host=self.host,
            reason=PARK_REASONS[reason].format(limit=controls.scale_limit) if reason else None,
        )
        return GateStep(parked=reason is not None)

    def _fit_scale_slot(self, limit: int | None, before_release: Callable[[], None]) -> None:
        """Hold a scale slot below ``limit`` if one is free; none when there is no limit."""
        slot = self.slot
        if slot is not None and (limit is None or slot >= limit):
            before_release()
            self.db.release_scale_slot(slot)
            self.slot = None
            log_event(
                log,
                logging.DEBUG,
                "worker.scale_slot_released",
                worker_id=self.worker_id,
                slot=slot,
            )
        if limit is not None and self.slot is None:
            self.slot = self.db.take_scale_slot(limit)
            if self.slot is not None:
                log_event(
                    log,
                    logging.DEBUG,
                    "worker.scale_slot_taken",
                    worker_id=self.worker_id,
                    slot=self.slot,
                    limit=limit,
                )

    def may_claim(self) -> bool:
        """False while parked or paused (the claim would take nothing: skip the statement)."""
        return self.parked is None and not self.controls.paused

    def rate_wait_s(self) -> float:
        """How long to wait before claiming again after the rate limit withheld jobs."""
        rate = self.controls.rate_limit
        if rate is None:  # a limit we have not read yet: look again soon
            self.dirty = True
            return min(self.poll_s, 0.1)
        return min(self.poll_s, max(RATE_WAIT_MIN_S, 1.0 / rate))

    def claim_gate(self) -> store.ClaimGate:
        """What the claim statement is told about this worker."""
        return store.ClaimGate(
            host=self.host,
            slot=self.slot,
            warm_key=self.warm_key,
            affinity_wait_s=self.affinity_wait_s,
        )

    def state(self, *, busy: bool, stopping: bool) -> str:
        """The state shown in ``queue-ctl workers``: stopping, busy, parked or idle."""
        if stopping:
            return "stopping"
        if busy:
            return "busy"
        return "parked" if self.parked else "idle"
