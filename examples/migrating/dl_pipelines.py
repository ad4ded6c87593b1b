"""dataloader's pipelines, ported: what changes is the decorator, nothing else.

The guide docs/migrating/dataloader.md walks through this module. A
dataloader pipeline was ``@register("task")`` on an ``async def f(args)``
with ``yield`` between chunks; here it is ``@task("task", queue=...)`` on the
same function. Each ``yield`` is still a heartbeat point and a cancel check;
a yielded dict is stored as the job's progress (dataloader's ``progress``).
The queue, the attempts and the lease a trigger used to send each time can
become the task's defaults, so every producer gets them.

Two pipelines of dataloader's README: ``noop`` (its quick-start example, in
queue ``etl.default``) and ``load.cbr.rates`` (its "add an ETL task" example,
in queue ``load.cbr``). The rates come from a deterministic stand-in instead
of the central bank, so the example runs anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

from queue_engine import task


@task("noop", queue="etl.default")
async def noop(args: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """dataloader's reference pipeline: three sleeps, a checkpoint after each."""
    for step in (1, 2, 3):
        await asyncio.sleep(float(args.get(f"sleep{step}", 0)))
        yield {"step": step, "of": 3}


def fetch_rates(day: date, currencies: list[str]) -> dict[str, float]:
    """A stand-in for the bank's API: a rate per currency, derived from the date."""
    return {c: round(50 + (day.toordinal() % 97) / 10 + i, 4) for i, c in enumerate(currencies)}


@task("load.cbr.rates", queue="load.cbr", max_attempts=3, lease_ttl_s=300)
async def load_cbr_rates(args: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The same body as in dataloader: fetch, transform, load, a checkpoint after each."""
    day = date.fromisoformat(args["date"])
    currencies = list(args.get("currencies", ["USD", "EUR"]))
    data = fetch_rates(day, currencies)
    yield {"step": "fetched", "rows": len(data)}
    rows = [{"day": day.isoformat(), "currency": c, "rate": r} for c, r in data.items()]
    yield {"step": "transformed", "rows": len(rows)}
    # A real pipeline upserts here (INSERT ... ON CONFLICT DO UPDATE), as before:
    # delivery is at least once in both systems.
    yield {"step": "loaded", "rows": len(rows)}
