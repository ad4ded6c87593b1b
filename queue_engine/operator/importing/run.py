"""The importer's run: read the old system in batches, write each batch in one transaction.

The source is only read: its session is opened read-only
(``default_transaction_read_only``), every statement is a plain SELECT
(no ``FOR UPDATE``, no ``LOCK``: the old system's workers keep claiming while
it runs), one autocommit statement per batch, paged by id so a batch never
holds a snapshot for long. The engine side writes a batch's jobs and their
``imported_ids`` rows in one statement (``import_jobs.sql``), a batch of
workflow runs in one transaction; a run that fails half-way leaves whole
batches behind it, and the next run skips what the map already holds.

One importer per engine schema and source at a time (``import_lock.sql``):
two at once could both copy a row before either mapped it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import connect, describe_dsn, first_line, schema_errors
from queue_engine.foundation.errors import ConfigError, DatabaseUnavailable, QueueEngineError
from queue_engine.operator.importing.convert import (
    PQRUN_PRIORITY_RULE,
    ImportJob,
    Refusal,
    batch_params,
    from_dataloader,
    from_pqrun,
    from_queue_workflows_ingest,
    pqrun_priority_clamped,
)
from queue_engine.operator.importing.workflows import WorkflowPlan, plan_run

SOURCES = ("dataloader", "pqrun", "queue_workflows")
BATCH_SIZE_DEFAULT = 500
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class _JobSource:
    """How one system's jobs are read and converted."""

    table: str
    first_key: Any
    convert: Callable[[Mapping[str, Any]], ImportJob | Refusal]


_JOBS: dict[str, _JobSource] = {
    "pqrun": _JobSource("jobs", 0, from_pqrun),
    "dataloader": _JobSource("dl_jobs", "00000000-0000-0000-0000-000000000000", from_dataloader),
    "queue_workflows": _JobSource("ingest_jobs", 0, from_queue_workflows_ingest),
}


def _counts_statement(source: str) -> str:
    """The source's statement counting its rows by kind and status (the first one sent)."""
    if source == "pqrun":
        return "import_source_pqrun_counts"
    if source == "dataloader":
        return "import_source_dataloader_counts"
    return "import_source_qw_counts"


def _jobs_statement(source: str) -> str:
    """The source's statement reading a page of its unfinished jobs."""
    if source == "pqrun":
        return "import_source_pqrun"
    if source == "dataloader":
        return "import_source_dataloader"
    return "import_source_qw_ingest"


#: The old statuses that are finished: counted, never moved.
_UNFINISHED = {
    "pqrun": {"READY", "RUNNING"},
    "dataloader": {"queued", "running"},
    "queue_workflows": {"queued", "running"},
}


@dataclass
class ImportReport:
    """What one import did (or, dry, would do): counts per kind and old status."""

    source: str
    where: str
    dry_run: bool
    #: (kind, old status) -> rows the source holds.
    found: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: (kind, old status, outcome) -> rows; outcome: imported, already imported,
    #: matched (a job of this engine held its key), refused, later (a race: run again).
    outcomes: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    refusals: list[Refusal] = field(default_factory=list)
    priority_clamped: int = 0
    batches: int = 0

    def lines(self) -> list[str]:
        """The report as text lines (``queue-ctl import`` prints them)."""
        verb = "would import" if self.dry_run else "imported"
        head = f"import from {self.source} at {self.where}"
        out = [head + (": dry run, nothing written" if self.dry_run else "")]
        if self.source == "pqrun":
            out.append(PQRUN_PRIORITY_RULE)
            if self.priority_clamped:
                out.append(f"  {self.priority_clamped} job(s) had a priority beyond -900..100")
        unfinished = _UNFINISHED[self.source]
        for (kind, status), n in sorted(self.found.items()):
            if kind == "node":
                out.append(f"  node-job {status}: {n} (a node moves with its run)")
                continue
            if status not in unfinished:
                out.append(f"  {kind} {status}: {n} not moved (finished or canceled)")
                continue
            done = {o: c for (k, s, o), c in self.outcomes.items() if (k, s) == (kind, status)}
            parts = [f"{done.pop('imported', 0)} {verb}"]
            parts += [f"{c} {o}" for o, c in sorted(done.items()) if c]
            note = " (as queued, attempts counted)" if status.lower() == "running" else ""
            out.append(f"  {kind} {status}: {n} found, {', '.join(parts)}{note}")
        for refusal in self.refusals[:20]:
            out.append(f"  refused {refusal.old_id} ({refusal.status}): {refusal.reason}")
        if len(self.refusals) > 20:
            out.append(f"  ... and {len(self.refusals) - 20} more refused")
        if any(o == "later" for (_, _, o) in self.outcomes):
            out.append("  some rows met a concurrent change: run the import again")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data (``--json``)."""
        return {
            "source": self.source,
            "dry_run": self.dry_run,
            "found": [{"kind": k, "status": s, "count": n} for (k, s), n in self.found.items()],
            "outcomes": [
                {"kind": k, "status": s, "outcome": o, "count": n}
                for (k, s, o), n in self.outcomes.items()
            ],
            "refused": [r.__dict__ for r in self.refusals],
            "priority_clamped": self.priority_clamped,
            "batches": self.batches,
        }


def _source_connection(dsn: str, schema: str) -> psycopg.Connection[Any]:
    """A read-only autocommit session on the old system's database (its tables first)."""
    if not _IDENTIFIER.match(schema):
        raise ConfigError(f"--source-schema must be a plain identifier, not {schema!r}")
    options = f"-c default_transaction_read_only=on -c search_path={schema}"
    return connect(dsn, options=options, application_name="queue-ctl import")


def _source_error(source: str, where: str, exc: psycopg.Error) -> QueueEngineError:
    """A missing table or column: the wrong database, schema or --from (exit 2)."""
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        table = _JOBS[source].table
        return ConfigError(
            f"the database at {where} is not a {source} database ({table} or a column it needs "
            f"is missing: {first_line(exc)}); check --from, --source-dsn and --source-schema"
        )
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseUnavailable(f"lost the source database at {where}: {first_line(exc)}")
    return DatabaseUnavailable(f"reading the source database at {where}: {first_line(exc)}")


@dataclass
class _Source:
    """The old system's read-only session; its errors become one-line errors of the import."""

    conn: psycopg.Connection[Any]
    system: str
    where: str

    def _rows(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run the named plain statement ``name`` on the source and return its rows."""
        try:
            with self.conn.cursor(row_factory=dict_row) as cur:
                return cur.execute(queries.plain(name), params).fetchall()
        except psycopg.Error as exc:
            raise _source_error(self.system, self.where, exc) from None

    def _pages(self, name: str, first: Any, size: int) -> Iterator[list[dict[str, Any]]]:
        """The rows of a read statement, ``size`` at a time, paged by its ``key`` column."""
        after = first
        while True:
            rows = self._rows(name, {"after": after, "limit": size})
            if not rows:
                return
            yield rows
            if len(rows) < size:
                return
            after = rows[-1]["key"]


def _known(
    conn: psycopg.Connection[Any], schema: str, source: str, kind: str, old_ids: list[str]
) -> dict[str, int]:
    rows = conn.execute(
        queries.query("import_known_ids", schema),
        {"source": source, "kind": kind, "old_ids": old_ids},
        prepare=False,  # as import_jobs: the map grows during the run
    ).fetchall()
    return {str(old): int(new) for old, new in rows}


def _dry_run_jobs(
    conn: psycopg.Connection[Any],
    schema: str,
    report: ImportReport,
    jobs: list[ImportJob],
    keys_seen: set[tuple[str, str]],
) -> None:
    """Count one batch's outcomes as the real run would have them, writing nothing.

    A row is "already imported" by the map, "matched" when a job of this
    engine holds its key (``import_key_matches.sql``) or an earlier row of
    this dry run took the key (the real run would have inserted that one
    first), else "imported". ``keys_seen`` carries the keys across batches.
    """
    old_ids = [j.old_id for j in jobs]
    known = _known(conn, schema, report.source, "job", old_ids)
    held = {
        str(old_id)
        for (old_id,) in conn.execute(
            queries.query("import_key_matches", schema),
            {
                "old_id": old_ids,
                "idempotency_key": [j.idempotency_key for j in jobs],
                "dedupe_key": [j.dedupe_key for j in jobs],
            },
        ).fetchall()
    }
    for job in jobs:
        keys = {("i", job.idempotency_key)} if job.idempotency_key else set()
        if job.dedupe_key:
            keys.add(("d", job.dedupe_key))
        if job.old_id in known:
            outcome = "already imported"
        elif job.old_id in held or keys & keys_seen:
            outcome = "matched an existing job by its key"
        else:
            outcome = "imported"
        keys_seen |= keys
        report.outcomes["job", job.status, outcome] += 1


def _import_jobs(
    conn: psycopg.Connection[Any],
    src: _Source,
    schema: str,
    report: ImportReport,
    size: int,
) -> None:
    spec = _JOBS[report.source]
    dry_keys: set[tuple[str, str]] = set()
    for rows in src._pages(_jobs_statement(report.source), spec.first_key, size):
        report.batches += 1
        jobs: list[ImportJob] = []
        for row in rows:
            item = spec.convert(row)
            if isinstance(item, Refusal):
                report.refusals.append(item)
                report.outcomes["job", item.status, "refused"] += 1
            else:
                jobs.append(item)
                if report.source == "pqrun" and pqrun_priority_clamped(row["priority"]):
                    report.priority_clamped += 1
        if not jobs:
            continue
        status_of = {j.old_id: j.status for j in jobs}
        if report.dry_run:
            _dry_run_jobs(conn, schema, report, jobs, dry_keys)
            continue
        with conn.transaction():
            # Never prepared: imported_ids grows from empty during the run, and
            # a generic plan made while it was empty scans it for every row.
            written = conn.execute(
                queries.query("import_jobs", schema),
                batch_params(report.source, jobs),
                prepare=False,
            ).fetchall()
        seen = set()
        for old_id, new_id, created in written:
            seen.add(old_id)
            if new_id is None:
                outcome = "later"
            else:
                outcome = "imported" if created else "matched an existing job by its key"
            report.outcomes["job", status_of[old_id], outcome] += 1
        for old_id in status_of.keys() - seen:
            report.outcomes["job", status_of[old_id], "already imported"] += 1


def _start_workflow(conn: psycopg.Connection[Any], schema: str, plan: WorkflowPlan) -> int:
    """Write one planned run: start it, give its finished nodes their results, carry attempts."""
    row = conn.execute(
        queries.query("start_workflow", schema),
        {
            "name": plan.name,
            "nodes": json.dumps(plan.nodes),
            "idempotency_key": None,
            "producer": "queue-ctl import",
            "schedule": None,
        },
    ).fetchone()
    assert row is not None
    workflow_id = int(row[0])
    for node, value in plan.provided:
        got = conn.execute(
            queries.query("provide_input", schema),
            {"id": workflow_id, "node": node, "value": value},
        ).fetchone()
        if got is None or got[0] != "provided":
            raise QueueEngineError(
                f"queue_workflows run {plan.old_id}: node {node} could not take its result "
                f"({got[0] if got else 'no answer'})"
            )
    if plan.attempts:
        conn.execute(
            queries.query("import_node_attempts", schema),
            {
                "workflow_id": workflow_id,
                "nodes": [a[0] for a in plan.attempts],
                "attempts": [a[1] for a in plan.attempts],
                "errors": [a[2] for a in plan.attempts],
            },
        )
    return workflow_id


def _import_workflows(
    conn: psycopg.Connection[Any],
    src: _Source,
    schema: str,
    report: ImportReport,
    size: int,
) -> None:
    for rows in src._pages("import_source_qw_runs", 0, size):
        report.batches += 1
        known = _known(conn, schema, report.source, "workflow", [str(r["old_id"]) for r in rows])
        plans: list[WorkflowPlan] = []
        for row in rows:
            status = str(row["status"])
            if str(row["old_id"]) in known:
                report.outcomes["workflow", status, "already imported"] += 1
                continue
            plan = plan_run(row)
            if isinstance(plan, Refusal):
                report.refusals.append(plan)
                report.outcomes["workflow", status, "refused"] += 1
            else:
                plans.append(plan)
        if report.dry_run:
            for plan in plans:
                report.outcomes["workflow", plan.status, "imported"] += 1
            continue
        if not plans:
            continue
        with conn.transaction():
            for plan in plans:
                new_id = _start_workflow(conn, schema, plan)
                mapped = conn.execute(
                    queries.query("import_map_workflow", schema),
                    {"source": report.source, "old_id": plan.old_id, "new_id": new_id},
                ).fetchone()
                if mapped is None:  # another importer won the row: undo this batch
                    raise QueueEngineError(
                        f"queue_workflows run {plan.old_id} was imported meanwhile; run again"
                    )
        for plan in plans:
            report.outcomes["workflow", plan.status, "imported"] += 1


def run_import(
    engine: psycopg.Connection[Any],
    schema: str,
    source: str,
    source_dsn: str,
    *,
    source_schema: str = "public",
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE_DEFAULT,
) -> ImportReport:
    """Import ``source``'s unfinished jobs (and workflows) into the engine on ``engine``.

    ``engine`` is an autocommit connection to this engine's database. Raises
    :class:`ConfigError` (a source that is not such a database, another
    import running) or :class:`DatabaseUnavailable`; never writes the source.
    """
    if source not in SOURCES:
        raise ConfigError(f"--from must be one of {', '.join(SOURCES)}, not {source!r}")
    where = describe_dsn(source_dsn)
    report = ImportReport(source=source, where=where, dry_run=dry_run)
    locked = engine.execute(
        queries.plain("import_lock"), {"key": f"queue-engine:import:{schema}:{source}"}
    ).fetchone()
    if not (locked and locked[0]):
        raise ConfigError(f"another `queue-ctl import --from {source}` is running on this schema")
    # A missing or old engine schema (imported_ids is migration 0029): exit 3.
    with _source_connection(source_dsn, source_schema) as conn, schema_errors(schema):
        src = _Source(conn, source, where)
        for row in src._rows(_counts_statement(source)):
            report.found[str(row["kind"]), str(row["status"])] += int(row["n"])
        _import_jobs(engine, src, schema, report, batch_size)
        if source == "queue_workflows":
            _import_workflows(engine, src, schema, report, batch_size)
    return report
