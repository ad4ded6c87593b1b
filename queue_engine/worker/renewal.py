"""The heartbeat statement's inputs and results: worker row, leases, progress, cancels.

:class:`Renewer` is what the heartbeat thread (:mod:`.heartbeat`) runs every
beat: one statement that beats the worker's row (state, RSS/CPU, host
telemetry), extends the lease of every held job, writes their buffered
progress and reads their cancel flags; a held job the statement could not
renew is no longer ours (a zombie) and is marked lost.

How often to beat (:func:`renew_period_s`): every ``heartbeat_s``, unless a
held job set a lease of its own shorter than three heartbeats: then often
enough to renew that lease three times over. Without that, a job enqueued
with ``lease_ttl_s=1`` under the default 10 s heartbeat would expire while
running, and the reaper would give a healthy job back to the queue.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import psutil

from queue_engine.telemetry import GpuProbe, host_telemetry
from queue_engine.worker import store
from queue_engine.worker.connection import Connection, WorkerConnection
from queue_engine.worker.jobs import HeldJobs

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
    """Runs the heartbeat statement for one worker and acts on what it reports."""

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
    ) -> None:
        """``state(busy)`` is the worker's shown state; ``warm_key()`` its current warm key.

        ``idle_beat_s``: the beat period while no job is held (None: ``heartbeat_s``).
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

    def period_s(self) -> float:
        """How often to beat now: :func:`renew_period_s`, or :func:`idle_beat_s` holding no job."""
        if self.jobs.current is None and not self.jobs.all() and not self.jobs.progress_pending():
            return self.idle_beat_s
        return renew_period_s(self.heartbeat_s, self.jobs.shortest_own_lease_s())

    def beat(self) -> None:
        """Heartbeat: worker row, leases and progress of held jobs, cancel flags."""
        held = self.jobs.for_beat()
        current = self.jobs.current
        busy = current is not None
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

        def run(conn: Connection) -> store.HeartbeatResult:
            result = store.heartbeat(
                conn,
                schema,
                worker_id=self.worker_id,
                state=self._state(busy),
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
                self.connection.register(conn, self._state(busy))
            return result

        result = self.connection.run(run, attempts=1)
        self.jobs.mark_canceled(result.cancel_ids)
        attempts = {job_id: attempt for job_id, attempt, _ in held}
        for lost in self.jobs.lost_of(result.lost_ids, attempts):
            self.jobs.mark_lost(
                lost,
                "the job is no longer this worker's running attempt "
                "(lease expired and reaped, recovered, or re-claimed)",
            )
