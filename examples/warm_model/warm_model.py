"""A GPU-style warm-model worker: load the model once per process, report progress per step.

Three engine features make the pattern:

- **once per process**: a worker process runs one job at a time, for as long
  as it lives, so a model kept in a module-level cache is loaded by the first
  job that needs it and reused by every later one (:func:`load_model`);
- **affinity key**: a job names the model it needs (``affinity_key=``); a
  worker that has that model loaded prefers such jobs, so with several models
  and several workers each worker stays warm for one (see
  ``QUEUE_ENGINE_AFFINITY_WAIT_S`` for how long the preference may hold a job);
- **stall watchdog fed by progress**: each step yields its progress, which the
  worker records on the job (``queue-ctl status ID`` shows it) and counts as a
  beat of the stall watchdog; a step that hangs (a wedged GPU kernel, a dead
  NCCL peer) stops the beats, and after ``stall_timeout_s`` the watchdog
  records the failure and exits 76 so systemd (or ``queue-ctl up``) starts a
  fresh process; the job is retried.

The model here is a stand-in, small enough to ship: swap :class:`TinyModel`
for ``torch.load(...).to("cuda")`` and :meth:`TinyModel.step` for a batch of
inference.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Generator
from typing import Any

from queue_engine import Client, Job, task

QUEUE = "gpu"
#: Seconds without a progress beat before the stall watchdog ends the process (exit 76).
STALL_TIMEOUT_S = int(os.environ.get("WARM_MODEL_STALL_TIMEOUT_S", "30"))

#: How many times this process loaded each model (the point: once).
LOADS: dict[str, int] = {}
_MODELS: dict[str, TinyModel] = {}


class TinyModel:
    """A stand-in for a model that is slow to load and cheap to run once loaded."""

    def __init__(self, name: str) -> None:
        self.name = name
        # "Weights": derived from the name, so every process computes the same ones.
        seed = sum(ord(c) for c in name)
        self.weights = [math.sin(seed + i) for i in range(64)]

    def step(self, x: float, i: int) -> float:
        """One step of inference."""
        w = self.weights[i % len(self.weights)]
        return math.tanh(x * w + w)


def load_model(name: str) -> TinyModel:
    """The model, loaded on first use in this process and kept."""
    model = _MODELS.get(name)
    if model is None:
        model = TinyModel(name)  # the slow part, in a real worker
        _MODELS[name] = model
        LOADS[name] = LOADS.get(name, 0) + 1
    return model


@task("model.infer", queue=QUEUE, stall_timeout_s=STALL_TIMEOUT_S, timeout_s=3600)
def infer(args: dict[str, Any]) -> Generator[dict[str, Any], None, dict[str, Any]]:
    """Run ``steps`` steps of the model on ``input``, yielding progress after each."""
    model = load_model(args["model"])
    steps = int(args.get("steps", 4))
    step_s = float(args.get("step_s", 0.0))  # the tests make a step slow on purpose
    x = float(args.get("input", 1.0))
    for i in range(steps):
        if step_s:
            time.sleep(step_s)
        x = model.step(x, i)
        yield {"step": i + 1, "of": steps}  # recorded on the job; a stall-watchdog beat
    return {
        "model": model.name,
        "output": round(x, 6),
        "pid": os.getpid(),
        "loads": LOADS[model.name],
    }


def submit(client: Client, model: str, value: float, steps: int = 4) -> Job:
    """Enqueue one inference, asking for a worker warm for ``model``."""
    return client.enqueue(
        "model.infer",
        queue=QUEUE,
        args={"model": model, "input": value, "steps": steps},
        affinity_key=model,
    )
