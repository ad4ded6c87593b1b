"""The orchestrator: migrations, leader election and the leader-only maintenance sweeps.

- :mod:`~queue_engine.orchestrator.leader` — the election protocol (read its
  docstring first);
- :mod:`~queue_engine.orchestrator.reaper` — expired leases back to the queue;
- :mod:`~queue_engine.orchestrator.heartbeat` — this process's workers row;
- :mod:`~queue_engine.orchestrator.orchestrator` — the composition the
  ``queue-orchestrator`` command runs.
"""

from __future__ import annotations

from queue_engine.orchestrator.heartbeat import Heartbeat, HeartbeatResult
from queue_engine.orchestrator.leader import ElectionResult, LeaderElector, leader_key
from queue_engine.orchestrator.orchestrator import Orchestrator, OrchestratorConfig
from queue_engine.orchestrator.reaper import ReapedJob, Reaper, ReapResult

__all__ = [
    "ElectionResult",
    "Heartbeat",
    "HeartbeatResult",
    "LeaderElector",
    "Orchestrator",
    "OrchestratorConfig",
    "ReapResult",
    "ReapedJob",
    "Reaper",
    "leader_key",
]
