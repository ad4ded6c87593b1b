"""A periodic ETL: schedule -> fetch -> load, one day of exchange rates at a time.

The shape of ``queue-claim-worker --queue=load.cbr``:

- **schedule**: ``@periodic`` enqueues ``cbr.fetch`` every day at 06:30
  Moscow time (the central bank publishes the day's rates overnight); the
  scheduler enqueues each slot exactly once, however many schedulers run;
- **fetch**: takes the day from the slot (``args["_schedule"]["slot"]``) or
  from ``args["date"]`` (a manual re-run, a backfill), fetches that day's rates
  and enqueues the load;
- **load**: writes the rates into the app's table, under a **lock key**
  (``cbr.rates``: one load at a time across every worker and host, so two
  days never interleave their writes) with an **idempotency key** per date
  (``cbr.load:2026-11-23``: a fetch that runs twice, a backfill that overlaps
  the schedule, an operator's re-run all get the same load job back instead of
  loading the day twice).

The source is a stand-in (:func:`fetch_rates`, deterministic rates derived
from the date) so the recipe runs anywhere; a real one calls the bank's API
there (``httpx.get(...)``) and raises on a bad answer, which the engine retries
with backoff.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from queue_engine import Client, Job, JobContext, periodic, task

QUEUE = "load.cbr"
#: One load at a time, cluster-wide.
LOCK_KEY = "cbr.rates"
#: The bank's day: a slot at 06:30 Moscow time loads that Moscow date.
BANK_TZ = ZoneInfo("Europe/Moscow")
CURRENCIES = ("USD", "EUR", "CNY")

TABLE = """
CREATE TABLE IF NOT EXISTS cbr_rates (
    day date NOT NULL,
    currency text NOT NULL,
    rate numeric(12, 4) NOT NULL,
    loaded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (day, currency)
)
"""


def day_of(args: dict[str, Any]) -> date:
    """The day a fetch is for: ``args["date"]``, else its slot's date in the bank's zone.

    A manual run (``queue-ctl schedules run-now cbr-daily``) has no slot: today.
    """
    if "date" in args:
        return date.fromisoformat(args["date"])
    slot = args.get("_schedule", {}).get("slot")
    when = datetime.fromisoformat(slot) if slot else datetime.now(UTC)
    return when.astimezone(BANK_TZ).date()


def fetch_rates(day: date) -> dict[str, float]:
    """The day's rates (a stand-in: a real source is an HTTP call)."""
    base = {"USD": 90.0, "EUR": 97.0, "CNY": 12.4}
    wobble = (day.toordinal() % 97) / 100
    return {code: round(base[code] + wobble, 4) for code in CURRENCIES}


def enqueue_load(client: Client, day: date, rates: dict[str, float]) -> Job:
    """Enqueue the load of ``day``: the same job for the same day, however often asked."""
    return client.enqueue(
        "cbr.load",
        queue=QUEUE,
        args={"date": day.isoformat(), "rates": rates},
        idempotency_key=f"cbr.load:{day.isoformat()}",
        lock_key=LOCK_KEY,
    )


@periodic("30 6 * * *", tz="Europe/Moscow", name="cbr-daily")
@task("cbr.fetch", queue=QUEUE, max_attempts=8)
def fetch(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Fetch one day's rates and enqueue their load."""
    day = day_of(args)
    rates = fetch_rates(day)
    load = enqueue_load(ctx.client(), day, rates)
    return {"date": day.isoformat(), "load_job": load.id, "new_load": load.created}


@task("cbr.load", queue=QUEUE, max_attempts=5)
def load(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Upsert the day's rates (idempotent: loading a day again writes the same rows)."""
    with ctx.connect() as conn, conn.transaction():
        conn.execute(TABLE)  # a real app runs its migrations instead
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO cbr_rates (day, currency, rate) VALUES (%s, %s, %s)"
                " ON CONFLICT (day, currency) DO UPDATE SET rate = EXCLUDED.rate,"
                " loaded_at = now()",
                [(args["date"], code, rate) for code, rate in args["rates"].items()],
            )
    return {"date": args["date"], "rows": len(args["rates"]), "lock_key": ctx.job.lock_key}
