"""The worker's finish-and-claim statement as the benches send it, and older or cut-down forms.

A bench that times or counts the statement outside a worker needs its text in
the form a worker sends (``store.raw_statement`` with the worker's tags), the
parameters a worker would bind, and for comparison: another build's text of
``finish_and_claim_jobs.sql``, the statement with a part knocked out, a bare
``UPDATE ... SKIP LOCKED``, and an older schema's parts as DDL (migrations'
down files).
"""

from __future__ import annotations

import json
from pathlib import Path

from queue_engine.foundation import sql as queries
from queue_engine.foundation.sql import compiler

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "queue_engine"
QUEUE = "bench"

#: A claim with nothing but the claim: the floor of the engine's claim on the same table.
BARE_CLAIM = (
    "UPDATE \"queue_engine\".jobs j SET status = 'running', attempt = j.attempt + 1,"
    " claimed_by = $1, started_at = now(), heartbeat_at = now(),"
    " lease_expires_at = now() + interval '60 s'"
    ' WHERE j.id = (SELECT c.id FROM "queue_engine".jobs c WHERE c.queue = $2'
    " AND c.status = 'queued' AND c.available_at <= now()"
    " ORDER BY c.priority, c.available_at, c.id LIMIT 1 FOR UPDATE SKIP LOCKED)"
    " RETURNING j.id, j.attempt, j.task, j.args"
)


#: The least possible queue (``latency_floor.py``): a one-column table, no trigger,
#: no event, no check; the enqueue inserts and notifies in one statement.
FLOOR_TABLE = (
    "CREATE TABLE floor_jobs"
    " (id bigserial PRIMARY KEY, t float8 NOT NULL, claimed bool NOT NULL DEFAULT false)"
)
FLOOR_ENQUEUE = (
    "WITH j AS (INSERT INTO floor_jobs (t) VALUES (%s) RETURNING id) "
    "SELECT pg_notify('floor', 'job') FROM j"
)
FLOOR_CLAIM = (
    "UPDATE floor_jobs SET claimed = true WHERE id = ("
    "SELECT id FROM floor_jobs WHERE NOT claimed ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    ") RETURNING t"
)

#: A worker session's settings (``store.configure_session``), as single-user input.
WORKER_SESSION = (
    "SET synchronous_commit = off;",
    "SET plan_cache_mode = force_generic_plan;",
    "SET enable_seqscan = off;",
)


def statement(tags: tuple[str, ...], sql_file: str | None = None) -> compiler.RawStatement:
    """The ``tags`` form of the worker's statement: this build's, or that of a
    candidate text of ``finish_and_claim_jobs.sql`` (another build's, say)."""
    if sql_file is None:
        return compiler.raw_statement("finish_and_claim_jobs", SCHEMA, tags)
    text = queries.render(Path(sql_file).read_text(), SCHEMA)
    return compiler.compile_statement(compiler.select_variant(text, tags), sql_file)


def knocked_out(
    statement: compiler.RawStatement, start: str, end: str, instead: str
) -> compiler.RawStatement:
    """``statement`` with the text from ``start`` up to (not including) ``end`` replaced."""
    text = statement.text
    first = text.index(start)
    last = text.index(end, first) if end else len(text)
    return compiler.RawStatement(text[:first] + instead + text[last:], statement.names)


def without_claim_event(worker: compiler.RawStatement) -> compiler.RawStatement:
    """The statement without its ``claim_events`` CTE (the last one): a knock-out."""
    return knocked_out(worker, ", claim_events AS (", " SELECT true AS is_claim", "")


def downs(*versions: int) -> str:
    """The down SQL of these migrations, in this order (an older build's parts, as DDL)."""
    texts = []
    for version in versions:
        (path,) = (ROOT / "migrations").glob(f"{version:04d}_*.down.sql")
        texts.append(path.read_text().replace("__SCHEMA__", SCHEMA))
    return "\n".join(texts)


def succeeded(job_id: int) -> dict[str, object]:
    """The worker's outcome of a first attempt that succeeded (as ``store.outcomes_json`` writes it)."""
    return {
        "id": job_id,
        "attempt": 1,
        "status": "succeeded",
        "kind": "succeeded",
        "refund": 0,
        "delay_s": 0.0,
        "duration_ms": 0,
    }


def execute(
    name: str, names: tuple[str, ...], outcomes: list[dict[str, object]], claim_limit: int = 1
) -> str:
    """``EXECUTE name(...)`` with the worker's parameters as SQL literals, in the statement's order."""
    params = {
        "outcomes": f"'{json.dumps(outcomes)}'",
        "worker_id": "'w'",
        "queue": f"'{QUEUE}'",
        "claim_limit": str(claim_limit),
        "lease_ttl_s": "60",
        "jobs_channel": "'queue_engine.jobs'",
        "host": "'h'",
        "slot": "NULL",
        "affinity_wait_s": "30.0",
        "followups": "'[]'",
    }
    return f"EXECUTE {name}({', '.join(params[n] for n in names)});"
