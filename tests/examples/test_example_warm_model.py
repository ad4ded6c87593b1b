"""examples/warm_model, in the test's process: one load per model, progress per step, stalls caught.

The same recipe under real worker processes (``queue-ctl up`` with the
example's fleet file, a worker killed and restarted) is in
test_example_fleets.py.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import pytest

from queue_engine import Client
from queue_engine.testing import DrainError, drain


@pytest.fixture
def warm_model(load_example: Any) -> ModuleType:
    return load_example("warm_model", "warm_model")


def test_the_model_loads_once_for_many_jobs_and_progress_is_recorded(
    warm_model: ModuleType, client: Client
) -> None:
    jobs = [warm_model.submit(client, "tiny-en", value) for value in (0.1, 0.2, 0.3, 0.4, 0.5)]
    jobs.append(warm_model.submit(client, "tiny-de", 0.1, steps=6))

    outcomes = drain(client, queue="gpu")

    assert [o.status for o in outcomes] == ["succeeded"] * 6
    assert warm_model.LOADS == {"tiny-en": 1, "tiny-de": 1}
    assert {o.result["pid"] for o in outcomes} == {os.getpid()}
    assert [o.result["loads"] for o in outcomes] == [1] * 6
    model = warm_model.TinyModel("tiny-en")  # the same computation, here: the result is real
    for job, outcome in zip(jobs[:5], outcomes[:5], strict=True):
        x = job.args["input"]
        for i in range(4):
            x = model.step(x, i)
        assert outcome.result["output"] == round(x, 6)
    for job in jobs:
        after = client.get(job.id)
        assert after.affinity_key == job.args["model"]
        steps = job.args["steps"]
        assert after.progress == {"step": steps, "of": steps}


def test_a_stalled_step_trips_the_stall_watchdog(
    load_example: Any, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Progress feeds the stall watchdog: a step longer than stall_timeout_s ends the worker (76)."""
    monkeypatch.setenv("WARM_MODEL_STALL_TIMEOUT_S", "1")
    warm_model = load_example("warm_model", "warm_model")
    job = client.enqueue(
        "model.infer",
        queue="gpu",
        args={"model": "tiny-en", "steps": 2, "step_s": 1.6},
        affinity_key="tiny-en",
    )
    with pytest.raises(DrainError, match="exited with code 76"):
        drain(client, queue="gpu")
    after = client.get(job.id)
    assert after.progress == {"step": 1, "of": 2}  # the last beat before the stall
    assert "stall" in (after.error or "").lower()
    assert warm_model.STALL_TIMEOUT_S == 1


class Clock:
    """A clock the test moves by hand: the idle-unload decision never waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_idle_model_is_unloaded_and_the_next_job_loads_it_again(
    warm_model: ModuleType, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    cache = warm_model.ModelCache(idle_s=600, clock=clock)
    monkeypatch.setattr(warm_model, "CACHE", cache)
    warm_model.submit(client, "tiny-en", 0.1)
    warm_model.submit(client, "tiny-de", 0.1)
    assert [o.status for o in drain(client, queue="gpu")] == ["succeeded"] * 2
    assert cache.loaded() == ["tiny-de", "tiny-en"]

    clock.now += 300  # tiny-en is used again half-way: its idle time starts over
    warm_model.submit(client, "tiny-en", 0.2)
    drain(client, queue="gpu")
    clock.now += 299.9
    assert cache.unload_idle() == []  # tiny-de: 599.9 s idle, not yet
    clock.now += 0.1
    assert cache.unload_idle() == ["tiny-de"]  # 600 s without a job of its key
    assert cache.loaded() == ["tiny-en"]
    clock.now += 300
    assert cache.unload_idle() == ["tiny-en"]
    assert cache.loaded() == []

    again = warm_model.submit(client, "tiny-en", 0.3)
    (outcome,) = drain(client, queue="gpu")
    assert outcome.status == "succeeded" and outcome.job_id == again.id
    assert outcome.result["loads"] == 2  # dropped, then loaded again by the next job
    assert warm_model.LOADS == {"tiny-en": 2, "tiny-de": 1}


def test_a_model_in_use_is_never_unloaded_and_zero_means_never(warm_model: ModuleType) -> None:
    clock = Clock()
    cache = warm_model.ModelCache(idle_s=10, clock=clock)
    with cache.use("tiny-en"):
        clock.now += 10_000  # a job far longer than the idle time
        assert cache.unload_idle() == []
    clock.now += 9.9
    assert cache.unload_idle() == []  # idle time counts from the job's end
    clock.now += 0.1
    assert cache.unload_idle() == ["tiny-en"]
    never = warm_model.ModelCache(idle_s=0, clock=clock)
    with never.use("tiny-en"):
        pass
    clock.now += 1e9
    assert never.unload_idle() == [] and never.loaded() == ["tiny-en"]
