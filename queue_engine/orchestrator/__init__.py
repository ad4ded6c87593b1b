"""The orchestrator: migrations, leader election and the leader-only maintenance sweeps.

- :mod:`~queue_engine.orchestrator.leader` — the election protocol (read its
  docstring first);
- :mod:`~queue_engine.orchestrator.sweep` — what every sweep below shares: its
  connection and session, class defaults, the bounded batch loop;
- :mod:`~queue_engine.orchestrator.reaper` — expired leases back to the queue;
- :mod:`~queue_engine.orchestrator.dead_workers` — flag silent workers that own jobs;
- :mod:`~queue_engine.orchestrator.fast_recovery` — jobs of workers whose session
  ended back to the queue without waiting for the lease;
- :mod:`~queue_engine.orchestrator.pruner` — retention of finished jobs, finished
  workflows (as a whole) and old worker rows;
- :mod:`~queue_engine.orchestrator.analyzer` — ANALYZE ``jobs`` after a burst;
- :mod:`~queue_engine.orchestrator.vacuumer` — VACUUM ``jobs`` during a drain, so
  claims do not walk the claim index's dead entries until autovacuum comes;
- :mod:`~queue_engine.orchestrator.input_timeouts` — fail workflow input nodes whose
  value did not come in time;
- :mod:`~queue_engine.orchestrator.stuck_nodes` — report (never repair) a workflow node
  left waiting after its parents ended: an engine bug;
- :mod:`~queue_engine.orchestrator.metrics` — the Prometheus metrics and ``/health``
  the orchestrator serves, read from the operator's figures;
- :mod:`~queue_engine.orchestrator.orchestrator` — the services the
  ``queue-orchestrator`` command runs on the shared daemon runtime
  (:mod:`queue_engine.daemon`, which also keeps this process's workers row).
"""

from __future__ import annotations

from queue_engine.orchestrator.dead_workers import (
    DeadWorkerResult,
    DeadWorkerSweep,
    FlaggedWorker,
)
from queue_engine.orchestrator.fast_recovery import FastRecovery, GoneWorker, RecoveryResult
from queue_engine.orchestrator.leader import ElectionResult, LeaderElector, leader_key
from queue_engine.orchestrator.orchestrator import Orchestrator, OrchestratorSettings
from queue_engine.orchestrator.reaper import ReapedJob, Reaper, ReapResult

__all__ = [
    "DeadWorkerResult",
    "DeadWorkerSweep",
    "ElectionResult",
    "FastRecovery",
    "FlaggedWorker",
    "GoneWorker",
    "LeaderElector",
    "Orchestrator",
    "OrchestratorSettings",
    "ReapResult",
    "ReapedJob",
    "Reaper",
    "RecoveryResult",
    "leader_key",
]
