"""queue_workflows' two job families, ported: ingest tasks and a DAG's nodes.

The guide docs/migrating/queue_workflows.md walks through this module.

- **Ingest**: ``register_ingest_task("leads.fetch", fn)`` with ``fn(reason,
  args)`` on a host-defined queue (``fetch``) becomes ``@task("leads.fetch",
  queue="fetch")`` on ``(args, ctx)``; the scheduler's reason is under
  ``args["_schedule"]["reason"]`` (``"schedule"`` or ``"catchup"``), a manual
  enqueue passes its own. ``set_ingest_schedule`` becomes ``@periodic`` (the
  guide shows it; left out here so that the example's fleet enqueues nothing
  by itself).
- **DAG**: a workflow is built in code (``Workflow``) instead of read from a
  pipeline schema by a provider hook; node modules' ``run(...)`` become
  ``@task`` handlers; ``{"$from": ...}`` references become ``result_of``; the
  ``cpu``/``gpu`` queues are ordinary queues, the GPU node's model is its
  ``affinity_key``, and an input node still waits for a person's value.
  There is no dispatcher and no outbox: the statement that ends a node
  releases its children.
"""

from __future__ import annotations

from typing import Any

from queue_engine import Client, JobContext, Workflow, result_of, task


def reason_of(args: dict[str, Any]) -> str:
    """queue_workflows' ``reason``: the scheduler's, else the caller's, else ``manual``."""
    scheduled = args.get("_schedule")
    if isinstance(scheduled, dict):
        return str(scheduled.get("reason", "schedule"))
    return str(args.get("reason", "manual"))


@task("leads.fetch", queue="fetch", timeout_s=3600)
def fetch_leads(args: dict[str, Any]) -> dict[str, Any]:
    """An ingest task: ``fn(reason, args)`` there, ``(args)`` here with the reason inside."""
    return {"reason": reason_of(args), "fetched": int(args.get("limit", 3))}


@task("leads.parse", queue="cpu")
def parse(args: dict[str, Any]) -> dict[str, Any]:
    """A CPU node: its result feeds the next node through a reference."""
    return {"leads": [f"{args['day']}-{i}" for i in range(3)]}


@task("leads.score", queue="gpu")
def score(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """A GPU node: one model per worker process, chosen by the job's affinity key."""
    leads = list(args["leads"])
    for i, _lead in enumerate(leads):
        ctx.progress({"step": i + 1, "of": len(leads)})  # queue_workflows' status_callback
    return {"scores": {lead: len(lead) / 10 for lead in leads}, "model": args["model"]}


@task("leads.publish", queue="cpu")
def publish(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Runs once the input node ``approve`` got its value."""
    approval = ctx.parent_results["approve"]
    return {"published": len(args["scores"]), "approved_by": approval["by"]}


def build(day: str, model: str = "scorer-small") -> Workflow:
    """The DAG a queue_workflows pipeline schema described: parse -> score -> approve -> publish."""
    wf = Workflow("leads", idempotency_key=f"leads:{day}")
    wf.add("parse", "leads.parse", queue="cpu", args={"day": day})
    wf.add(
        "score",
        "leads.score",
        queue="gpu",
        affinity_key=model,
        after=["parse"],
        args={"leads": result_of("parse", "leads"), "model": model},
    )
    wf.input("approve", after=["score"])
    wf.add(
        "publish",
        "leads.publish",
        queue="cpu",
        after=["approve", "score"],
        args={"scores": result_of("score", "scores")},
    )
    return wf


def start(day: str) -> int:
    """Start the day's workflow (idempotent: a second start returns the first) and return its id."""
    with Client() as client:
        return client.start_workflow(build(day)).id
