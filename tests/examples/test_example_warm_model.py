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
