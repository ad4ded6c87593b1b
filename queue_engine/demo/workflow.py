"""``queue-ctl demo --workflow``: one workflow run by the demo's real workers.

The workflow shows the three shapes a pipeline has (tasks in
:mod:`queue_engine.demo.app`)::

    fetch ─┬─ part-0 ─┐
           ├─ ...     ├─ merge ── approve (input) ── publish
           └─ part-4 ─┘

``fetch`` lists items; one ``part`` per item (fan-out) gets its item through a
``$result`` reference; ``merge`` (fan-in) becomes claimable in the statement
that ends the last part; ``approve`` is an input node, which the demo provides
itself a moment after it starts awaiting (printing that it does, and the
command an operator would type), so the run ends on its own; ``publish``
reads the approval. At the end the DAG is drawn as ``queue-ctl workflows
show`` draws it. :mod:`queue_engine.demo.demo` starts the database and the
daemons and calls :func:`run`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

import click

from queue_engine import Workflow, result_of
from queue_engine.cli import workflow_render
from queue_engine.producer.client import Client
from queue_engine.producer.workflows.model import NodeInfo, WorkflowInfo, WorkflowState

ITEMS = 5
INPUT_NODE = "approve"
INPUT_VALUE = {"by": "the demo", "note": "looks good"}
#: How long the input node is seen awaiting before the demo provides its value.
INPUT_AFTER_S = 1.0


class StatusLine(Protocol):
    """The demo's live line (``demo.Screen``)."""

    def show(self, line: str, elapsed_s: float) -> None:
        """Display the current status."""

    def done(self) -> None:
        """End the live line."""


def build(queue: str) -> Workflow:
    """The demo's workflow: fan-out, fan-in, an input node."""
    wf = Workflow("demo-pipeline", producer="queue-ctl demo")
    wf.add("fetch", "demo.wf.fetch", queue=queue, args={"items": ITEMS})
    parts = [
        wf.add(
            f"part-{i}",
            "demo.wf.part",
            queue=queue,
            after=["fetch"],
            args={"item": result_of("fetch", "items", i)},
        )
        for i in range(ITEMS)
    ]
    wf.add("merge", "demo.wf.merge", queue=queue, after=parts)
    wf.input(INPUT_NODE, after=["merge"], queue=queue, timeout_s=300)
    wf.add("publish", "demo.wf.publish", queue=queue, after=[INPUT_NODE])
    return wf


def _awaiting(nodes: list[NodeInfo]) -> bool:
    return any(
        n.node == INPUT_NODE and workflow_render.node_state(n) == "awaiting input" for n in nodes
    )


def run(
    client: Client,
    queue: str,
    *,
    screen: StatusLine,
    check: Callable[[], None],
    started: float,
    deadline: float,
    color: bool,
) -> WorkflowInfo:
    """Start the workflow, follow it (providing the input), draw it; return its final row.

    ``check`` raises when a daemon died; past ``deadline`` the workflow is
    returned as it is (the caller says it did not finish).
    """
    info = client.start_workflow(build(queue))
    click.echo(
        f"started workflow {info.id} ({info.name}): fetch -> {ITEMS} parts (fan-out) -> "
        f"merge (fan-in) -> {INPUT_NODE} (input node) -> publish: {info.node_count} nodes "
        "inserted by one call"
    )
    awaiting_since: float | None = None
    provided = False
    try:
        while True:
            info = client.get_workflow(info.id)
            nodes = list(client.workflow_nodes(info.id))
            states = workflow_render.counts_text(
                {
                    s: sum(1 for n in nodes if workflow_render.node_state(n) == s)
                    for s in workflow_render.STATE_ORDER
                }
            )
            screen.show(f"workflow {info.id} {info.state}: {states}", time.monotonic() - started)
            if info.state != WorkflowState.RUNNING or time.monotonic() > deadline:
                break
            if not provided and _awaiting(nodes):
                if awaiting_since is None:
                    awaiting_since = time.monotonic()
                elif time.monotonic() - awaiting_since >= INPUT_AFTER_S:
                    screen.done()
                    value = json.dumps(INPUT_VALUE)
                    click.echo(
                        f"input node {INPUT_NODE} is awaiting a value: the demo provides it "
                        f"now, as an operator would with\n  queue-ctl workflows provide-input "
                        f"{info.id} {INPUT_NODE} '{value}'"
                    )
                    client.provide_input(info.id, INPUT_NODE, INPUT_VALUE)
                    provided = True
            check()
            time.sleep(0.3)
    finally:
        screen.done()
    nodes = list(client.workflow_nodes(info.id))
    click.echo("")
    lines = workflow_render.show_lines(info, nodes, datetime.now(UTC), color=color)
    click.echo("\n".join(lines), color=color)
    results = {n.node: n.result for n in nodes}
    click.echo("")
    for name in ("merge", "publish"):
        if results.get(name) is not None:
            click.echo(f"{name} returned {json.dumps(results[name])}")
    return info
