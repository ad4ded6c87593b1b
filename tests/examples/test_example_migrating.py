"""examples/migrating: the handlers each migration guide ports, run by the testing kit.

The guides (docs/migrating/*.md) are followed literally against a real
``queue-ctl up`` fleet by test_walkthroughs.py; here each ported module runs
in the test's process with ``drain``, so a handler that stops working fails
with its own name, and each of the folder's three fleet files (one per old
system; ``test_example_fleets`` checks only ``fleet.toml``) is checked the same
way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from queue_engine import Client
from queue_engine.cli.up import build_config, read_file
from queue_engine.testing import drain

FOLDER = Path(__file__).resolve().parents[2] / "examples" / "migrating"


@pytest.mark.parametrize("name", ["fleet.toml", "pqrun.toml", "queue_workflows.toml"])
def test_each_fleet_file_is_valid_and_its_app_imports(name: str, tmp_path: Path) -> None:
    path = FOLDER / name
    config = build_config(read_file(path), None, [], str(path), folder=path.parent)
    env = config.environment({k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    done = subprocess.run(
        [sys.executable, "-c", f"import {config.app}"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_the_dataloader_pipelines_run_unchanged_and_record_progress(
    load_example: Any, client: Client
) -> None:
    load_example("migrating", "dl_pipelines")
    rates = client.enqueue(
        "load.cbr.rates",
        args={"date": "2025-01-10", "currencies": ["USD", "EUR"]},
        lock_key="cbr_rates_2025-01-10",
    )
    noop = client.enqueue("noop", args={"sleep1": 0, "sleep2": 0, "sleep3": 0})
    assert (rates.queue, rates.max_attempts, rates.lease_ttl_s) == ("load.cbr", 3, 300)
    assert noop.queue == "etl.default"

    assert [o.status for o in drain(client, queue="load.cbr")] == ["succeeded"]
    assert [o.status for o in drain(client, queue="etl.default")] == ["succeeded"]
    assert client.get(rates.id).progress == {"step": "loaded", "rows": 2}
    assert client.get(noop.id).progress == {"step": 3, "of": 3}


def test_the_pqrun_chain_enqueues_embed_with_the_success_of_summarize(
    load_example: Any, client: Client
) -> None:
    load_example("migrating", "pqrun_handlers")
    client.enqueue("summarize", args={"conversation_id": 123}, dedupe_key="summarize:conv:123")
    bad = client.enqueue("summarize", args={})

    outcomes = drain(client, queue="default")

    assert sorted((o.task, o.status) for o in outcomes) == [
        ("embed", "succeeded"),
        ("summarize", "failed"),
        ("summarize", "succeeded"),
    ]
    embed = next(o for o in outcomes if o.task == "embed")
    assert embed.result == {"summary_id": 1230, "vectors": 1, "attempt": 1}
    assert client.get(bad.id).attempt == 1  # Permanent: no retry


def test_the_queue_workflows_dag_waits_for_its_input_then_publishes(
    load_example: Any, client: Client
) -> None:
    qw = load_example("migrating", "qw_tasks")
    info = client.start_workflow(qw.build("2026-11-28"))
    fetch = client.enqueue("leads.fetch", args={"reason": "backfill", "limit": 5})

    assert [o.status for o in drain(client, queue="fetch")] == ["succeeded"]
    assert client.get(fetch.id).result == {"reason": "backfill", "fetched": 5}
    assert [o.task for o in drain(client, queue="cpu")] == ["leads.parse"]
    [scored] = drain(client, queue="gpu")
    assert scored.status == "succeeded" and scored.result["model"] == "scorer-small"
    assert drain(client, queue="cpu") == []  # publish waits for the input node

    assert client.provide_input(info.id, "approve", {"by": "ana"})
    [published] = drain(client, queue="cpu")
    assert published.result == {"published": 3, "approved_by": "ana"}
    assert client.get_workflow(info.id).state == "succeeded"
    assert qw.reason_of({"_schedule": {"reason": "catchup"}}) == "catchup"
