"""Deployment files agree with each other and with the docs (issue 10, defects 4, 5 and 8).

- The documented Compose enqueue commands put their job in a queue that a
  worker service of ``docker-compose.yml`` serves, with an app that registers
  the task (a job in queue ``default`` would wait forever: no service serves it).
- ``.dockerignore`` keeps virtualenvs, ``.git``, caches and build output out of
  the image's build context, and keeps what the inline Dockerfile copies.
- The docs quote each systemd unit's own ``Restart=`` value, and state no
  schema version other than the last migration's.

PyYAML is not a dependency (and not installed here), so ``docker-compose.yml``
is read with a small parser for the subset the file uses: two-space indented
``services:`` entries whose ``entrypoint``/``command`` are JSON-style flow lists.
"""

from __future__ import annotations

import importlib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, engine_migrations_dir, load_chain
from queue_engine.producer.tasks import registry

ROOT = Path(__file__).resolve().parent.parent.parent
COMPOSE = ROOT / "docker-compose.yml"
DEFAULT_QUEUE = "default"


@dataclass
class ComposeService:
    """What the tests need of one service: its entrypoint, command and environment."""

    name: str
    entrypoint: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)


def compose_services(text: str) -> dict[str, ComposeService]:
    """The ``services:`` of a Compose file written in this repository's style."""
    services: dict[str, ComposeService] = {}
    current: ComposeService | None = None
    in_services = False
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):  # a top-level key
            in_services = line == "services:"
            current = None
            continue
        if not in_services:
            continue
        service = re.fullmatch(r"  ([A-Za-z0-9_.-]+):", line)
        if service:
            current = services.setdefault(service.group(1), ComposeService(service.group(1)))
            continue
        assert current is not None, f"unexpected line in services: {raw!r}"
        setting = re.fullmatch(r"\s+([A-Za-z_][A-Za-z0-9_-]*):\s*(.*)", line)
        if not setting:
            continue
        key, value = setting.groups()
        if key in ("entrypoint", "command") and value.startswith("["):
            setattr(current, key, json.loads(value))
        elif key.startswith("QUEUE_ENGINE_"):
            current.environment[key] = value.strip("'\"")
    return services


def worker_queues(services: dict[str, ComposeService]) -> dict[str, ComposeService]:
    """Queue name -> the worker service that serves it."""
    served: dict[str, ComposeService] = {}
    for service in services.values():
        if service.entrypoint != ["queue-claim-worker"]:
            continue
        for arg in service.command:
            if arg.startswith("--queue="):
                served[arg.removeprefix("--queue=")] = service
    return served


def enqueue_examples(text: str) -> list[list[str]]:
    """Every documented ``docker compose run ... enqueue ...`` command, as argv."""
    found = []
    for line in text.splitlines():
        line = line.lstrip("#").strip()
        if line.startswith("docker compose run") and " enqueue " in line:
            found.append(shlex.split(line.split("  #", 1)[0], comments=True))
    return found


def queue_of(argv: list[str]) -> str:
    """The queue an enqueue command targets: --queue/-q, else queue-ctl's default.

    The compose ``migrate`` service does not import the app, so queue-ctl cannot
    take the task's own queue: without --queue a job goes to ``default``.
    """
    for i, arg in enumerate(argv):
        if arg in ("--queue", "-q"):
            return argv[i + 1]
        if arg.startswith("--queue="):
            return arg.removeprefix("--queue=")
    return DEFAULT_QUEUE


def test_compose_parser_reads_the_services() -> None:
    services = compose_services(COMPOSE.read_text())
    assert {"postgres", "migrate", "orchestrator", "worker-demo", "worker-bench"} <= set(services)
    assert services["worker-demo"].command == ["--queue=demo"]
    assert services["worker-demo"].environment["QUEUE_ENGINE_APP"] == "queue_engine.demo.app"
    assert "QUEUE_ENGINE_APP" not in services["migrate"].environment
    assert set(worker_queues(services)) == {"demo", "bench"}


@pytest.mark.parametrize("doc", ["docker-compose.yml", "docs/deploy.md"])
def test_documented_compose_enqueue_targets_a_served_queue(doc: str) -> None:
    served = worker_queues(compose_services(COMPOSE.read_text()))
    examples = enqueue_examples((ROOT / doc).read_text())
    assert examples, f"no compose enqueue example found in {doc}"
    for argv in examples:
        queue = queue_of(argv)
        assert queue in served, (
            f"{doc}: {shlex.join(argv)} enqueues into queue {queue!r}, which no worker "
            f"service serves (served: {sorted(served)}): the job would wait forever"
        )
        # ... and that worker's app registers the task.
        task = argv[argv.index("enqueue") + 1]
        app = importlib.import_module(served[queue].environment["QUEUE_ENGINE_APP"])
        if task not in registry.names():  # imported by an earlier test, registry reset since
            importlib.reload(app)
        assert task in registry.names(), f"{task} is not a task of the app serving {queue}"


# -- .dockerignore --------------------------------------------------------------


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.removeprefix("!").strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]").replace(r"\[", "[").replace(r"\]", "]")
        if any(re.fullmatch(regex, c) for c in candidates):
            excluded = not negate
    return excluded


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".ci-venv/lib/python3.11/site-packages/x.py",
        "venv-other/bin/python",
        ".git/HEAD",
        ".pytest_cache/v/cache",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/x",
        "queue_engine/__pycache__/client.cpython-311.pyc",
        "queue_engine/worker/__pycache__/loop.cpython-311.pyc",
        "dist/queue_engine-0.1.0-py3-none-any.whl",
        "build/lib/queue_engine/producer/client.py",
        "tests/conftest.py",
    ],
)
def test_dockerignore_keeps_out(path: str) -> None:
    assert dockerignore_excludes(dockerignore_patterns(), path)


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "queue_engine/producer/client.py",
        "queue_engine/foundation/sql/finish_and_claim_jobs.sql",
        "migrations/0001_initial.sql",
    ],
)
def test_dockerignore_keeps_what_the_dockerfile_copies(path: str) -> None:
    assert not dockerignore_excludes(dockerignore_patterns(), path)
    # ... and the inline Dockerfile copies exactly the top-level entries allowed.
    copied = re.findall(r"^\s+COPY (.+) \S+$", COMPOSE.read_text(), flags=re.M)
    sources = {s.rstrip("/") for line in copied for s in line.split()}
    assert path.split("/")[0] in sources


# -- docs quote the units and the schema ----------------------------------------------

UNITS = {
    "worker": ROOT / "systemd" / "queue-claim-worker@.service",
    "orchestrator": ROOT / "systemd" / "queue-orchestrator.service",
    "scheduler": ROOT / "systemd" / "queue-scheduler.service",
}


def unit_restart(path: Path) -> str:
    [value] = re.findall(r"^Restart=(\S+)$", path.read_text(), flags=re.M)
    return value


def documents() -> list[Path]:
    """Docs and docstrings (the CHANGELOG is history: its old entries stay as written)."""
    found = [ROOT / "README.md", ROOT / "systemd" / "README.md"]
    found += sorted((ROOT / "docs").rglob("*.md"))
    found += sorted((ROOT / "queue_engine").rglob("*.py"))
    return found


def test_docs_quote_each_units_restart_policy() -> None:
    """Each ``Restart=X`` quoted in the docs is the value of the daemon named just before it."""
    expected = {daemon: unit_restart(path) for daemon, path in UNITS.items()}
    assert expected["worker"] == "on-failure"  # `queue-ctl stop` must stick
    wrong = []
    for doc in documents():
        text = doc.read_text()
        for match in re.finditer(r"Restart=([a-z-]+)", text):
            before = text[max(0, match.start() - 400) : match.start()].lower()
            named = [(before.rfind(d), d) for d in expected if d in before]
            if not named:
                continue
            daemon = max(named)[1]
            if match.group(1) != expected[daemon]:
                line = text.count("\n", 0, match.start()) + 1
                wrong.append(f"{doc.relative_to(ROOT)}:{line}: {match.group(0)} for the {daemon}")
    assert not wrong, "docs quote a restart policy their unit does not have:\n" + "\n".join(wrong)


def test_readme_states_no_stale_schema_version() -> None:
    last = load_chain(engine_migrations_dir())[-1].version
    assert last == ENGINE_SCHEMA_VERSION
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for match in re.finditer(
            r"schema versions? (\d+)(?:\s*(?:-|\u2013|to)\s*(\d+))?", doc.read_text()
        ):
            newest = int(match.group(2) or match.group(1))
            # "needs schema version 3" is a minimum and may stay; a range claims the newest.
            if match.group(2) is not None or "README" in doc.name:
                assert newest == last, f"{doc.relative_to(ROOT)}: {match.group(0)!r} (last: {last})"


# The worker-split branch rewrites this module (and its two DESIGN.md citations);
# remove the exception when it is merged.
CITATIONS_PENDING = {"queue_engine/worker/loop.py"}


def test_modules_cite_only_documents_in_the_repository() -> None:
    missing = []
    for module in sorted((ROOT / "queue_engine").rglob("*.py")):
        name = str(module.relative_to(ROOT))
        if name in CITATIONS_PENDING:
            continue
        for cited in re.findall(r"[A-Za-z0-9_./-]+\.md\b", module.read_text()):
            if not (ROOT / cited).is_file():
                missing.append(f"{name}: {cited}")
    assert not missing, "modules cite documents that are not in the repository:\n" + "\n".join(
        missing
    )
