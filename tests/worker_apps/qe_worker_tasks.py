"""Tasks for the worker tests, imported by ``queue-claim-worker --app qe_worker_tasks``.

Tests put this folder on the subprocess's PYTHONPATH. Handlers that need to
tell the test what happened write to the ``worker_test_log`` table through
``ctx.connect()`` (the table is created by the tests), never to module state:
the worker is another process.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from queue_engine import ExponentialBackoff, FixedBackoff, Permanent, Snooze, task
from queue_engine.producer.context import JobContext
from queue_engine.producer.tasks import TaskRegistry, registry

QUEUE = "wt"


def _record(ctx: JobContext, what: str, started: float, ended: float) -> None:
    with ctx.connect() as conn:
        conn.execute(
            "INSERT INTO worker_test_log (job_id, lock_key, what, started, ended, pid)"
            " VALUES (%s, %s, %s, to_timestamp(%s), to_timestamp(%s), %s)",
            (ctx.job.id, ctx.job.lock_key, what, started, ended, os.getpid()),
        )


@task("echo", queue=QUEUE)
def echo(args: dict[str, Any]) -> dict[str, Any]:
    return {"echo": args}


@task("async_echo", queue=QUEUE)
async def async_echo(args: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"async": args}


@task("steps", queue=QUEUE)
def steps(args: dict[str, Any], ctx: JobContext) -> Iterator[dict[str, Any]]:
    n = int(args.get("n", 3))
    for i in range(n):
        yield {"step": i + 1, "of": n}
    return {"total": n, "attempt": ctx.job.attempt}


@task("async_steps", queue=QUEUE)
async def async_steps(args: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    for i in range(int(args.get("n", 2))):
        await asyncio.sleep(0)
        yield {"step": i + 1}


@task("flaky", queue=QUEUE, max_attempts=3, retry=FixedBackoff(0.2))
def flaky(args: dict[str, Any], ctx: JobContext) -> str:
    if ctx.job.attempt <= int(args.get("fail_times", 1)):
        raise RuntimeError(f"flaky failure on attempt {ctx.job.attempt}")
    return f"ok on attempt {ctx.job.attempt}"


@task("permanent", queue=QUEUE)
def permanent(args: dict[str, Any]) -> None:
    raise Permanent("this input can never work")


@task("snooze_once", queue=QUEUE)
def snooze_once(args: dict[str, Any]) -> str:
    marker = Path(args["marker"])
    if not marker.exists():
        marker.write_text("snoozed")
        raise Snooze(0.2)
    return "woke up"


@task("secretive", queue=QUEUE, max_attempts=1)
def secretive(args: dict[str, Any]) -> None:
    raise ValueError("failing on purpose")


@task("record", queue=QUEUE)
def record(args: dict[str, Any], ctx: JobContext) -> None:
    started = time.time()
    time.sleep(float(args.get("sleep", 0.0)))
    _record(ctx, args.get("what", "run"), started, time.time())


@task("wait_cancel", queue=QUEUE)
def wait_cancel(args: dict[str, Any]) -> Iterator[None]:
    deadline = time.monotonic() + float(args.get("max_s", 30))
    while time.monotonic() < deadline:
        time.sleep(0.02)
        yield None


@task("ledger.load_rows", queue=QUEUE, max_attempts=1)
def load_rows(args: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Reports ``{"step": done, "of": rows}`` with a message, then holds its worker until canceled."""
    progress = {
        "step": int(args.get("done", 17)),
        "of": int(args.get("rows", 40)),
        "message": f"loading {args.get('file', 'rows')}",
    }
    deadline = time.monotonic() + float(args.get("max_s", 600))
    while time.monotonic() < deadline:
        yield progress
        time.sleep(0.05)


FEED_URL = (
    "https://exports.example.com/v2/accounts/acme-holdings-international/ledgers/2026/11/23/"
    "transactions-full-export.csv?signature=9f2c1e7b44d04a6f8e3b0c5d2a7f9e1b&expires=1795392000"
)


def _parse_amount(row: int, cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise ValueError(
            f"row {row}: column 'amount' holds {cell!r}, which is not a decimal number; the feed "
            "writes amounts with a comma as the decimal separator and a currency suffix, so set "
            "decimal=',' on the import or fix the export"
        ) from None


@task("feeds.import", queue=QUEUE, max_attempts=1)
def feeds_import(args: dict[str, Any]) -> None:
    """Fails as a real import does: a long message, a URL longer than any pane, a chained cause."""
    url = str(args.get("url", FEED_URL))
    try:
        _parse_amount(int(args.get("row", 1842)), str(args.get("cell", "12,50 EUR")))
    except ValueError as exc:
        raise RuntimeError(
            f"import of {url} stopped after 1,841 of 52,000 rows; nothing was written"
        ) from exc


@task("bad_result", queue=QUEUE)
def bad_result(args: dict[str, Any]) -> object:
    return {"when": object()}


@task(
    "backoff",
    queue=QUEUE,
    max_attempts=4,
    retry=ExponentialBackoff(base_s=0.1, factor=2.0, max_s=1.0, jitter=0.0),
)
def backoff(args: dict[str, Any], ctx: JobContext) -> int:
    if ctx.job.attempt <= int(args.get("fail_times", 2)):
        raise RuntimeError(f"backoff failure on attempt {ctx.job.attempt}")
    return ctx.job.attempt


@task("nul_error", queue=QUEUE, max_attempts=1)
def nul_error(args: dict[str, Any]) -> None:
    raise ValueError("a message with a NUL \x00 in it")


@task("backend_pid", queue=QUEUE, max_attempts=1)
def backend_pid(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """The server process of the handler's connection and two of its settings.

    Uses the connection the way handlers usually do (``with``), runs the same
    statement several times (psycopg prepares it after five), then leaves a
    session setting and an advisory lock behind, so a test can see whether two
    jobs got the same session and whether the second found it clean.
    """
    with ctx.connect() as conn:
        for _ in range(3):
            row = conn.execute(
                "SELECT pg_backend_pid(), current_setting('synchronous_commit'),"
                " current_setting('statement_timeout'),"
                " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                "  AND pid = pg_backend_pid())"
            ).fetchone()
        conn.execute("SET statement_timeout = '123s'")
        conn.execute("SELECT pg_advisory_lock(4242)")
    assert row is not None
    pid, sync, timeout, advisory = row
    return {
        "pid": pid,
        "synchronous_commit": sync,
        "statement_timeout": timeout,
        "advisory": advisory,
    }


# -- liveness: watchdogs, cancel, zombies, graceful stop, chaos ----------------------


@task("sleepy", queue=QUEUE, max_attempts=2, retry=FixedBackoff(60))
def sleepy(args: dict[str, Any]) -> dict[str, Any]:
    """Sleeps ``sleep`` seconds (in C, releasing the GIL), then returns.

    With ``started_file``, first creates that file, so a test can tell the
    handler is running (not merely claimed).
    """
    if args.get("started_file"):
        Path(args["started_file"]).touch()
    time.sleep(float(args.get("sleep", 0)))
    return {"slept": args.get("sleep", 0)}


@task("busy", queue=QUEUE, max_attempts=1)
def busy(args: dict[str, Any]) -> int:
    """A busy Python loop for ``seconds``: never sleeps, never yields."""
    deadline = time.monotonic() + float(args.get("seconds", 60))
    n = 0
    while time.monotonic() < deadline:
        n += 1
    return n


@task("stall_gen", queue=QUEUE, max_attempts=1, stall_timeout_s=1)
def stall_gen(args: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Reports progress once, then hangs without reporting: the stall watchdog's case."""
    yield {"step": 1}
    time.sleep(float(args.get("sleep", 60)))
    yield {"step": 2}


@task("ignore_cancel", queue=QUEUE)
def ignore_cancel(args: dict[str, Any]) -> str:
    """Sleeps through any cancel: the hard-stop case."""
    time.sleep(float(args.get("sleep", 60)))
    return "ignored the cancel"


@task("zombie_gen", queue=QUEUE, max_attempts=3)
def zombie_gen(args: dict[str, Any], ctx: JobContext) -> Iterator[None]:
    """Attempt 1 yields (a checkpoint) every 20 ms for ``max_s``; later attempts return at once."""
    if ctx.job.attempt == 1:
        deadline = time.monotonic() + float(args.get("max_s", 60))
        while time.monotonic() < deadline:
            time.sleep(0.02)
            yield None
        return "attempt 1 ran to its end"
    return f"attempt {ctx.job.attempt}"


@task("zombie_sleep", queue=QUEUE, max_attempts=3)
def zombie_sleep(args: dict[str, Any], ctx: JobContext) -> str:
    """Attempt 1 sleeps through everything (no checkpoint); later attempts return at once."""
    if ctx.job.attempt == 1:
        time.sleep(float(args.get("sleep", 60)))
        return "attempt 1 woke up"
    return f"attempt {ctx.job.attempt}"


@task("chaos", queue=QUEUE, max_attempts=100)
def chaos(args: dict[str, Any], ctx: JobContext) -> int:
    """Appends ``job attempt pid`` to the file ``log`` (one write, O_APPEND), then sleeps a bit.

    The file counts executions across processes that may be SIGKILLed at any time.
    """
    line = f"{ctx.job.id} {ctx.job.attempt} {os.getpid()}\n".encode()
    fd = os.open(args["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    time.sleep(float(args.get("sleep", 0)))
    return ctx.job.attempt


@task("gil_hang", queue=QUEUE, max_attempts=1)
def gil_hang(args: dict[str, Any]) -> str:
    """Calls libc ``sleep`` through ``ctypes.PyDLL``: the GIL stays held, every thread freezes."""
    import ctypes

    ctypes.PyDLL(None).sleep(int(args.get("sleep", 3)))
    return "thawed"


NAMES = (
    "nul_error",
    "echo",
    "async_echo",
    "steps",
    "async_steps",
    "flaky",
    "permanent",
    "snooze_once",
    "secretive",
    "record",
    "wait_cancel",
    "ledger.load_rows",
    "feeds.import",
    "bad_result",
    "backoff",
    "sleepy",
    "busy",
    "stall_gen",
    "ignore_cancel",
    "zombie_gen",
    "zombie_sleep",
    "chaos",
    "gil_hang",
    "backend_pid",
)
_private: TaskRegistry | None = None
#: The definitions as this module registered them at import. A test that imports the
#: module for the first time inside its body (for a constant, say) sees its tasks
#: unregistered again by the suite's ``_clean_registry`` afterwards; the private
#: registry is built from these, not from what the global registry still holds.
_DEFINITIONS = {name: registry.get(name) for name in NAMES}


def private_registry() -> TaskRegistry:
    """These tasks in a registry of their own, removed from the process-wide one.

    In-process tests hand this to ``Worker`` so that the global registry stays
    as other tests expect it.
    """
    global _private
    if _private is None:
        _private = TaskRegistry()
        for name in NAMES:
            definition = _DEFINITIONS[name]
            assert definition is not None, name
            _private.register(definition)
            if registry.get(name) is not None:
                registry.unregister(name)
    return _private
