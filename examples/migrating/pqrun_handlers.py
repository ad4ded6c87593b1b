"""pqrun's handlers, ported: ``(ctx)`` becomes ``(args, ctx)``, ``ctx.store.enqueue`` becomes ``ctx.enqueue``.

The guide docs/migrating/pqrun.md walks through this module. pqrun's design
document chains ``summarize`` into ``embed`` from inside the handler
(``await ctx.store.enqueue(job_type="embed", payload=...)``); here
``ctx.enqueue`` buffers the follow-up and the worker writes it in the same
statement that records the success, so ``embed`` exists if and only if
``summarize`` succeeded (pqrun's chain could leave an ``embed`` behind a
``summarize`` that then failed, and retried, and chained again).

pqrun's ``Worker(handlers={"summarize": ..., "embed": ...})`` becomes one
``@task`` per handler; ``ctx.job.payload`` is the first parameter, ``args``.
The return value is stored as the job's result, as in pqrun (any JSON value
here, not only a dict).
"""

from __future__ import annotations

from typing import Any

from queue_engine import JobContext, Permanent, task


@task("summarize", queue="default")
def summarize(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Summarize one conversation, then chain the embedding of the summary."""
    if "conversation_id" not in args:
        raise Permanent("payload has no conversation_id")  # pqrun: mark_error(terminal=True)
    summary_id = int(args["conversation_id"]) * 10
    ctx.enqueue("embed", queue="default", args={"summary_id": summary_id})
    return {"summary_id": summary_id, "tokens": 1234}


@task("embed", queue="default")
async def embed(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Embed one summary (a coroutine handler, as pqrun's were)."""
    return {"summary_id": args["summary_id"], "vectors": 1, "attempt": ctx.job.attempt}
