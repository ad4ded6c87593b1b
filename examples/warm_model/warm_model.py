"""A GPU-style warm-model worker: load the model once per process, report progress per step.

Three engine features make the pattern:

- **once per process**: a worker process runs one job at a time, for as long
  as it lives, so a model kept in a module-level cache is loaded by the first
  job that needs it and reused by every later one (:class:`ModelCache`);
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

Plus one thing the engine leaves to the recipe, **idle unload**: a model that
no job has used for ``WARM_MODEL_IDLE_UNLOAD_S`` seconds (default 600; 0:
never) is dropped, so a worker that served a burst of ``tiny-en`` jobs gives
the GPU memory back instead of holding it until it is recycled. A daemon
thread (:class:`IdleUnloader`) asks the cache every few seconds; the decision
itself (:meth:`ModelCache.unload_idle`) takes the time as an argument, so it
is tested with an injected clock and no sleeping. A model in use by the
running job is never dropped; one dropped is loaded again by the next job
that needs it. The worker still prefers jobs of the model it was warm for
(``affinity_key``) after an unload: that costs one load, and keeps a stream of
jobs of one model on one worker.

The model here is a stand-in, small enough to ship: swap :class:`TinyModel`
for ``torch.load(...).to("cuda")`` and :meth:`TinyModel.step` for a batch of
inference.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from queue_engine import Client, Job, task

QUEUE = "gpu"
log = logging.getLogger("warm_model")
#: Seconds without a progress beat before the stall watchdog ends the process (exit 76).
STALL_TIMEOUT_S = int(os.environ.get("WARM_MODEL_STALL_TIMEOUT_S", "30"))

#: Seconds without a job of a model before the model is dropped (0: never).
IDLE_UNLOAD_S = float(os.environ.get("WARM_MODEL_IDLE_UNLOAD_S", "600"))
#: How often the unloader thread asks the cache (at most; a fifth of the idle time).
UNLOAD_CHECK_S = 5.0

#: How many times this process loaded each model (the point: once, unless unloaded).
LOADS: dict[str, int] = {}


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


@dataclass
class _Entry:
    model: TinyModel
    last_used: float
    in_use: int = 0


class ModelCache:
    """The process's loaded models: loaded on first use, dropped after ``idle_s`` unused.

    ``clock`` is injected (``time.monotonic`` in the worker, a variable in
    tests). The lock guards the dict between the job's thread and the
    unloader's; loading happens under it too, which is fine for one job at a
    time.
    """

    def __init__(
        self,
        idle_s: float = IDLE_UNLOAD_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        load: Callable[[str], TinyModel] = TinyModel,
    ) -> None:
        self.idle_s = idle_s
        self.clock = clock
        self._load = load
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @contextlib.contextmanager
    def use(self, name: str) -> Iterator[TinyModel]:
        """The model for the length of a job (loaded if needed); its idle time starts after."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                entry = _Entry(self._load(name), self.clock())  # the slow part, for real
                self._entries[name] = entry
                LOADS[name] = LOADS.get(name, 0) + 1
            entry.in_use += 1
        try:
            yield entry.model
        finally:
            with self._lock:
                entry.in_use -= 1
                entry.last_used = self.clock()

    def loaded(self) -> list[str]:
        """The names of the models held now."""
        with self._lock:
            return sorted(self._entries)

    def unload_idle(self, now: float | None = None) -> list[str]:
        """Drop the models unused for ``idle_s`` (never one in use); return their names.

        A real model also frees its GPU memory here (``del model;
        torch.cuda.empty_cache()``): dropping the last reference is what lets it go.
        """
        if self.idle_s <= 0:
            return []
        at = self.clock() if now is None else now
        with self._lock:
            idle = [
                name
                for name, e in self._entries.items()
                if e.in_use == 0 and at - e.last_used >= self.idle_s
            ]
            for name in idle:
                del self._entries[name]
        return sorted(idle)


class IdleUnloader:
    """A daemon thread that asks the cache to drop idle models every ``check_s`` seconds.

    Started by the first load; a daemon thread never keeps the worker alive,
    and a worker process ends with its models anyway.
    """

    def __init__(self, cache: ModelCache, check_s: float) -> None:
        self.cache = cache
        self.check_s = check_s
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def ensure_started(self) -> None:
        """Start the thread once (no-op when idle unload is off)."""
        if self.cache.idle_s <= 0:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="warm-model-unloader", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.check_s)
            for name in self.cache.unload_idle():
                log.info("unloaded model %s (no job for %gs)", name, self.cache.idle_s)


CACHE = ModelCache()
_UNLOADER = IdleUnloader(CACHE, min(UNLOAD_CHECK_S, max(IDLE_UNLOAD_S / 5, 0.1)))


@task("model.infer", queue=QUEUE, stall_timeout_s=STALL_TIMEOUT_S, timeout_s=3600)
def infer(args: dict[str, Any]) -> Generator[dict[str, Any], None, dict[str, Any]]:
    """Run ``steps`` steps of the model on ``input``, yielding progress after each."""
    _UNLOADER.ensure_started()
    steps = int(args.get("steps", 4))
    step_s = float(args.get("step_s", 0.0))  # the tests make a step slow on purpose
    x = float(args.get("input", 1.0))
    with CACHE.use(args["model"]) as model:  # never unloaded while this job runs
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
