"""The worker's beat target: its row, the leases, progress and cancels of the jobs it holds.

The worker's heartbeat is the daemons' one
:class:`~queue_engine.daemon.heartbeat.Heartbeat`, run by the daemon runtime;
:class:`Renewer` is what it beats (a
:class:`~queue_engine.daemon.heartbeat.BeatTarget`) and how often (a
:class:`~queue_engine.daemon.heartbeat.Cadence`):

- :meth:`Renewer.register` opens the worker's connection, which registers its
  row (:class:`~queue_engine.worker.connection.WorkerConnection`), retried
  until it works or the worker is told to stop;
- :meth:`Renewer.beat` runs one statement that beats the worker's row (state,
  RSS/CPU, host telemetry), extends the lease of every held job, writes their
  buffered progress and reads their cancel flags and the operator's hard
  stop (``queue-ctl stop --now``); a held job the statement could not renew
  is no longer ours (a zombie) and is marked lost;
- :meth:`Renewer.mark_stopped` marks the row stopped and closes the connection,
  once the held jobs were given back and their outcomes flushed.

How often to beat (:func:`renew_period_s`): every ``heartbeat_s``, unless a
held job set a lease of its own shorter than three heartbeats: then often
enough to renew that lease three times over. Without that, a job enqueued
with ``lease_ttl_s=1`` under the default 10 s heartbeat would expire while
running, and the reaper would give a healthy job back to the queue. A worker
holding no job beats less often (:func:`idle_beat_s`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import psutil

from queue_engine.daemon.telemetry import GpuProbe, host_telemetry
from queue_engine.worker import store
from queue_engine.worker.connection import Connection, WorkerConnection
from queue_engine.worker.jobs import HeldJobs

#: Attempts to mark the row stopped at the end (the database may be why we stop).
MARK_STOPPED_ATTEMPTS = 2

log = logging.getLogger("queue_engine.worker")

#: Renewals per lease: a job's lease is renewed at least this many times per its TTL.
RENEWALS_PER_LEASE = 3
#: A worker that holds no job beats every this many heartbeats (at most; see idle_beat_s).
IDLE_BEATS = 2


def idle_beat_s(heartbeat_s: float, dead_after_s: float) -> float:
    """Seconds between the beats of a worker that holds no job.

    Its beat renews no lease, it only says "alive" to the views (``queue-ctl
    workers``, ``stats``, metrics: dead once ``dead_after_s`` old) and keeps
    the row's telemetry fresh, and on a database serving hundreds of idle
    workers each beat's round trip is most of what the fleet costs
    (``bench/idle_fleet.py``). So it beats every :data:`IDLE_BEATS` heartbeats,
    but always at least one heartbeat before ``dead_after_s`` runs out (with
    the defaults: every 20 s, dead after 30 s), and never more rarely than a
    busy worker would be judged. A worker that starts a job beats at once if
    its last beat is a heartbeat old, so a busy worker's row is never older
    than before and the dead-worker sweep's bound is unchanged.
    """
    return max(heartbeat_s, min(IDLE_BEATS * heartbeat_s, dead_after_s - heartbeat_s))


def renew_period_s(heartbeat_s: float, shortest_lease_s: float | None) -> float:
    """Seconds between beats: ``heartbeat_s``, shortened for a held job's short own lease."""
    if shortest_lease_s is None:
        return heartbeat_s
    return min(heartbeat_s, shortest_lease_s / RENEWALS_PER_LEASE)


class Renewer:
    """The worker's beat target: registers, runs the heartbeat statement, marks the row stopped."""

    def __init__(
        self,
        connection: WorkerConnection,
        jobs: HeldJobs,
        *,
        worker_id: str,
        heartbeat_s: float,
        lease_ttl_s: int,
        state: Callable[[bool], str],
        warm_key: Callable[[], str | None],
        clock: Callable[[], float],
        publish_telemetry: bool = False,
        idle_beat_s: float | None = None,
        on_stop_now: Callable[[], None] = lambda: None,
    ) -> None:
        """``state(busy)`` is the worker's shown state; ``warm_key()`` its current warm key.

        ``idle_beat_s``: the beat period while no job is held (None: ``heartbeat_s``).
        ``on_stop_now``: called from a beat that read back an operator's hard stop.
        """
        self.connection = connection
        self.jobs = jobs
        self.worker_id = worker_id
        self.heartbeat_s = heartbeat_s
        self.lease_ttl_s = lease_ttl_s
        self._state = state
        self._warm_key = warm_key
        self._clock = clock
        self._publish = publish_telemetry
        self.idle_beat_s = heartbeat_s if idle_beat_s is None else idle_beat_s
        self._process = psutil.Process()
        self._gpu = GpuProbe()
        self._telemetry_at: float | None = None  # clock of the last telemetry sent
        self._on_stop_now = on_stop_now
        # Set by a controls NOTIFY while a job runs: beat at the next tick, so a
        # hard stop is read back within a tick rather than a heartbeat period.
        self._beat_soon = False

    # -- the cadence -------------------------------------------------------------

    def period_s(self) -> float:
        """How often to beat now: :func:`renew_period_s`, or :func:`idle_beat_s` holding no job."""
        if self.jobs.current is None and not self.jobs.all() and not self.jobs.progress_pending():
            return self.idle_beat_s
        return renew_period_s(self.heartbeat_s, self.jobs.shortest_own_lease_s())

    def progress_pending(self) -> bool:
        """True when some held job has progress not yet written (or a beat was asked for)."""
        return self._beat_soon or self.jobs.progress_pending()

    def beat_soon(self) -> None:
        """Beat at the next tick (a controls NOTIFY while a job runs: maybe ``stop --now``)."""
        self._beat_soon = True

    def job_running(self) -> bool:
        """True while a handler executes."""
        return self.jobs.current is not None

    def poll_notifications(self) -> None:
        """Read notifications already on the socket (a cancel NOTIFY), never waiting."""
        self.connection.poll_notifications()

    # -- the target ----------------------------------------------------------------

    def register(self) -> str:
        """Connect (which registers the row and LISTENs), retrying until it works or a stop.

        A stop while retrying raises :class:`~queue_engine.daemon.StopRequested`.
        """
        self.connection.run(lambda conn: None)
        return self._state(False)

    def mark_stopped(self) -> None:
        """Mark the row stopped (best effort), then close the connection."""
        schema = self.connection.schema
        try:
            self.connection.run(
                lambda conn: store.mark_stopped(conn, schema, worker_id=self.worker_id),
                attempts=MARK_STOPPED_ATTEMPTS,
            )
        except Exception as exc:
            log.debug("could not mark the worker stopped: %s", exc)
        self.connection.drop()

    def beat(self) -> str:
        """Heartbeat: worker row, leases and progress of held jobs, cancel flags; the state."""
        self._beat_soon = False
        held = self.jobs.for_beat()
        current = self.jobs.current
        busy = current is not None
        state = self._state(busy)
        try:
            rss = self._process.memory_info().rss
            cpu: float | None = self._process.cpu_percent()
        except psutil.Error:
            rss, cpu = None, None
        # Host telemetry (load, nvidia-smi) at most once per heartbeat period: a
        # beat that only writes progress or renews a short lease reuses the stored one.
        now = self._clock()
        telemetry: str | None = None
        if self._telemetry_at is None or now - self._telemetry_at >= self.heartbeat_s:
            self._telemetry_at = now
            telemetry = json.dumps(host_telemetry(self._gpu))
        schema = self.connection.schema

        def run(conn: Connection) -> store.BeatReply:
            result = store.heartbeat(
                conn,
                schema,
                worker_id=self.worker_id,
                state=state,
                current_job_id=current.job.id if current else None,
                held=held,
                lease_ttl_s=self.lease_ttl_s,
                rss_bytes=rss,
                cpu_percent=cpu,
                telemetry=telemetry,
                publish=self._publish,
                warm_key=self._warm_key(),
            )
            if not result.registered:
                self.connection.register(conn, state)
            return result

        result = self.connection.run(run, attempts=1)
        if result.stop_now:
            self._on_stop_now()
        self.jobs.mark_canceled(result.cancel_ids)
        attempts = {job_id: attempt for job_id, attempt, _ in held}
        for lost in self.jobs.lost_of(result.lost_ids, attempts):
            self.jobs.mark_lost(
                lost,
                "the job is no longer this worker's running attempt "
                "(lease expired and reaped, recovered, or re-claimed)",
            )
        return state
