"""schemathesis against a live ``queue-web``: every operation answers as its OpenAPI document says.

A public fuzzer reads ``/openapi.json`` and sends each of the API's
operations generated requests, valid ones and invalid ones (boundary values,
NUL characters, wrong JSON types, missing fields), to the real server
(``queue-web`` as a subprocess, on the test's own Postgres database, with an
operator token so that mutating operations run too). Every answer must be:

- no server error (``not_a_server_error``): a 5xx only when the database is
  down, and it is not;
- documented: its status (``status_code_conformance``), its content type
  (``content_type_conformance``: problem+json for errors) and its body
  (``response_schema_conformance``);
- a request the document calls valid is not refused (``positive_data_acceptance``),
  and one it calls invalid is (``negative_data_rejection``): the document
  states exactly what the server accepts.

Two rules of the API are not about one request, so no document can state
them, and the cases are adjusted for them rather than the checks weakened:
an idempotency key reused with another payload is refused (422, as the IETF
Idempotency-Key draft says), so each case gets keys of its own; and the
``Idempotency-Key`` header and a body's ``idempotency_key`` must agree. A
workflow's node names, parents and cycles are checked by the engine, beyond
what JSON Schema can say: its start is held to every check but the positive
acceptance.

Bounded and deterministic: a fixed seed, derandomized generation, a few
dozen examples per operation, no example database written to the checkout.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path
from typing import Any

import schemathesis
from schemathesis.engine import Status, events
from support.orchestrators import procs, wait_for
from support.ports import free_port
from support.web_process import TOKEN, get, spawn

__all__ = ["procs"]  # a fixture: imported so that pytest finds it here

MAX_EXAMPLES = 20
SEED = 20261128
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "positive_data_acceptance",
    "negative_data_rejection",
)
#: Operations with rules JSON Schema cannot state (see the module doc).
NO_POSITIVE_ACCEPTANCE = ({"path": "/api/v1/workflows", "method": "POST"},)
KEY_FIELDS = ("idempotency_key",)
_unique = itertools.count(1)


def config(*, exceptions: bool = True) -> schemathesis.Config:
    """The run's configuration: seed, examples, checks, the operator token.

    ``exceptions``: with the per-operation rules of :data:`NO_POSITIVE_ACCEPTANCE`
    (a schema filtered with ``include`` ignores its filter when the
    configuration lists operations: a run of some operations goes without).
    """
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            # One worker thread: generation in several threads trips a CPython 3.11 bug in
            # hypothesis's lambda descriptions ("AST constructor recursion depth mismatch").
            "workers": 1,
            "headers": {"Authorization": f"Bearer {TOKEN}"},
            "generation": {
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "database": "none",
            },
            # Stateful links are not declared; examples: none are written.
            "phases": {"stateful": {"enabled": False}},
            "checks": {
                "enabled": False,
                **{name: {"enabled": True} for name in CHECKS},
            },
            "operations": [
                {
                    "include-path": op["path"],
                    "include-method": op["method"],
                    "checks": {"positive_data_acceptance": {"enabled": False}},
                }
                for op in (NO_POSITIVE_ACCEPTANCE if exceptions else ())
            ],
        }
    )


def _valid_key(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 255 and "\x00" not in value


def own_keys(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: Any) -> None:
    """Give a case idempotency keys no other case used, header and body agreeing (when valid).

    A ``before_call`` hook: schemathesis checks the edited case again, so a
    case generated invalid for another reason stays invalid.
    """
    fresh = f"fuzz-{next(_unique)}"
    header = (case.headers or {}).get("Idempotency-Key")
    if _valid_key(header) and header.isascii():
        case.headers["Idempotency-Key"] = fresh
    body = case.body if isinstance(case.body, dict) else None
    if body is not None and _valid_key(body.get("idempotency_key")):
        body["idempotency_key"] = fresh


def failures_of(schema: Any) -> tuple[int, int, list[str]]:
    """Run every phase; (scenarios run, requests checked, one line per failed check or error)."""
    ran, checked, found = 0, 0, []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished) and event.status is not Status.SKIP:
            ran += 1
            checked += len(event.recorder.checks)
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.status is Status.FAILURE and check.failure_info is not None:
                        info = check.failure_info
                        found.append(
                            f"{event.label}: {check.name}: {info.failure.title}\n"
                            f"  {info.failure.message}\n  {info.code_sample}"
                        )
        elif isinstance(event, events.NonFatalError | events.FatalError):
            found.append(f"{getattr(event, 'label', 'run')}: error: {event.info.message}")
    return ran, checked, sorted(set(found))


#: The operations ``--compat dataloader`` serves in place of the native ones (or adds).
DATALOADER_PATHS = [
    "/api/v1/jobs/trigger",
    "/api/v1/jobs/{job_id}/status",
    "/api/v1/jobs/{job_id}/cancel",
    "/health",
    "/info",
    "/status",
]


def fuzz(
    dsn: str,
    tmp_path: Path,
    procs: list[subprocess.Popen[bytes]],
    *options: str,
    paths: list[str] | None = None,
) -> int:
    """Fuzz a ``queue-web`` started with ``options`` (only ``paths``, if given); the operations run."""
    port = free_port()
    log = tmp_path / "web.log"
    procs.append(spawn(dsn, port, log, *options))
    wait_for("queue-web to be ready", lambda: get(port, "/ready")[0] == 200, procs)
    schema = schemathesis.openapi.from_url(
        f"http://127.0.0.1:{port}/openapi.json", config=config(exceptions=paths is None)
    )
    if paths is not None:
        schema = schema.include(path=paths)
    operations = list(schema.get_all_operations())
    # before_call hooks are process-wide only: registered for this run alone.
    schemathesis.hook("before_call")(own_keys)
    try:
        ran, checked, found = failures_of(schema)
    finally:
        schemathesis.hooks.unregister(own_keys)
    assert ran >= len(operations) and checked >= 10 * len(operations), (ran, checked)
    assert not found, "\n".join(found)
    assert "web.error" not in log.read_text()
    return len(operations)


def test_every_operation_answers_as_its_document_says(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    assert fuzz(dsn, tmp_path, procs) >= 39


def test_the_dataloader_routes_answer_as_their_document_says(
    dsn: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """``--compat dataloader``: its routes as its document states them (200, 400, UUID ids)."""
    ran = fuzz(dsn, tmp_path, procs, "--compat", "dataloader", paths=DATALOADER_PATHS)
    assert ran == len(DATALOADER_PATHS)
