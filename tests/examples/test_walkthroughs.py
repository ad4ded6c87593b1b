"""The local-development guide and each example's README, followed literally.

A user reads "in one terminal: ``queue-ctl up ...``; once it says ready, in a
second terminal: ..." and types what the page says. These tests do the same:
the fenced ``sh`` blocks of a page marked ``<!-- walkthrough: background -->``
(a long-running command: the fleet, a web app) are started as written, each
in a shell of its own, and waited for until they say they are ready; the
blocks marked ``<!-- walkthrough: run -->`` are run as written, each as one
shell script in a shell of its own (``set -e``: every command must succeed),
in page order, from the repository root, with no DSN and no ``PG*`` variable
set. Then the jobs the page's commands made must all have succeeded, and the
fleet must stop on Ctrl-C with exit 0.

The one liberty taken with the text: port 8000 becomes a free port, so that
a run never collides with whatever else listens there.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psycopg
import pytest
from support.ctl import BIN, clean_env
from support.ports import free_port
from support.up import read, wait

from queue_engine.foundation import localfleet

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- walkthrough: (background|run) -->\s*\n```sh\n(.*?)```", re.DOTALL)
#: What a long-running command prints once it can be used.
READY = {
    "queue-ctl up": re.compile(r"\| ready: \d+ processes up"),
    "uvicorn": re.compile(r"Application startup complete"),
    # Logged once uvicorn is bound ("Application startup complete" comes before the bind).
    "queue-web": re.compile(r"Uvicorn running on http"),
}

#: Each walked page, and the succeeded jobs per task its commands leave in the fleet's database.
PAGES = {
    "docs/guides/local-development.md": {"demo.hello": 1, "demo.progress": 1},
    "examples/warm_model/README.md": {"model.infer": 2},
    "examples/periodic_etl/README.md": {"cbr.fetch": 2, "cbr.load": 2},
    "examples/sqlalchemy_session/README.md": {"billing.send_invoice": 1},
    "examples/starlette_app/README.md": {"shop.confirm_order": 1},
    # Try it (2), the README's trigger through --compat dataloader (1), the import's due job (1).
    "docs/migrating/dataloader.md": {"noop": 1, "load.cbr.rates": 4},
    # Patterns 1 and 2 (2 summarize, each chaining an embed), then the import: the due
    # READY summarize (and its embed) and the RUNNING embed; the delayed one waits.
    "docs/migrating/pqrun.md": {"summarize": 3, "embed": 4},
    "docs/migrating/queue_workflows.md": {
        "leads.fetch": 1,
        "leads.parse": 2,  # the day's workflow, and the imported ingest job
        "leads.score": 2,  # the day's workflow, and the imported run's second node
        "queue-engine:input": 2,  # approve, and the imported run's finished first node
        "leads.publish": 1,
    },
}


@dataclass(frozen=True)
class Block:
    """One marked ``sh`` block of a page."""

    kind: str
    script: str


def blocks(page: str) -> list[Block]:
    """The marked blocks of ``page``, in order."""
    text = (REPO / page).read_text()
    return [Block(kind, script) for kind, script in MARKER.findall(text)]


def _env() -> dict[str, str]:
    env = clean_env()
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["QUEUE_ENGINE_POLL_S"] = "0.2"
    return env


def _ready_pattern(script: str) -> re.Pattern[str]:
    for command, pattern in READY.items():
        if command in script:
            return pattern
    raise AssertionError(f"no readiness rule for the background block {script!r}")


def _succeeded(dsn: str) -> Counter[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT task, status FROM queue_engine.jobs_all").fetchall()
    assert all(status in ("queued", "running", "succeeded") for _, status in rows), rows
    return Counter(task for task, status in rows if status == "succeeded")


#: A block that needs a command not built yet: skipped until it becomes ``run``.
PENDING = re.compile(r"<!-- walkthrough: pending -->\s*\n```sh\n(.*?)```", re.DOTALL)


def test_every_pending_block_is_a_sh_block_after_the_fleet() -> None:
    """Turning ``pending`` into ``run`` must give a block this test runs, after the fleet starts."""
    for page in PAGES:
        text = (REPO / page).read_text()
        markers = text.count("<!-- walkthrough: pending -->")
        assert len(PENDING.findall(text)) == markers, page
        if markers:
            fleet = text.index("<!-- walkthrough: background -->")
            assert text.index("<!-- walkthrough: pending -->") > fleet, page


def test_every_walked_page_has_a_fleet_and_commands() -> None:
    for page in PAGES:
        kinds = [b.kind for b in blocks(page)]
        assert kinds[:1] == ["background"] and "run" in kinds, (page, kinds)
        assert "queue-ctl up" in blocks(page)[0].script, page


def _background(script: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], IO[bytes], str]:
    """Start a long-running block in a session of its own; return once it says it is ready."""
    out = tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    pattern = _ready_pattern(script)
    wait(
        f"{script.strip()!r} to be ready",
        lambda: pattern.search(read(out)) or proc.poll() is not None,
        timeout=90,
    )
    assert proc.poll() is None, read(out)
    return proc, out, script


@pytest.mark.parametrize("page", list(PAGES))
def test_the_page_followed_literally_works(page: str) -> None:
    port = str(free_port())
    env = _env()
    started: list[tuple[subprocess.Popen[bytes], IO[bytes], str]] = []
    finished = False
    try:
        for block in blocks(page):
            script = block.script.replace("8000", port)
            if block.kind == "background":
                started.append(_background(script, env))
            else:
                done = subprocess.run(
                    ["bash", "-e", "-c", script],
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode == 0, (
                    f"{script}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
                )

        fleet = localfleet.find()
        assert fleet is not None
        expected = Counter(PAGES[page])
        wait(
            f"the jobs of {page} to succeed",
            lambda: _succeeded(fleet.dsn) == expected,
            timeout=60,
        )
        finished = True
    finally:
        for proc, out, script in reversed(started):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait(10)
            text = read(out)
            out.close()
            if finished and "queue-ctl up" in script:
                assert code == 0, text
    assert localfleet.find() is None  # the fleet's record went with it
