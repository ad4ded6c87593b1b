"""Contract: the wheel is self-contained.

It ships the engine's migrations (as ``queue_engine/migrations``) and every
runtime SQL file, declares the console scripts, and, unpacked on its own (no
source checkout on the path), imports from itself, finds its own migrations,
loads the chain and migrates a database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION
from queue_engine.foundation.version import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]
#: One test process builds the wheel once for all the tests here (pytest-xdist).
pytestmark = pytest.mark.xdist_group("packaging")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel once for this module (``python -m build --wheel``)."""
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO_ROOT)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=out,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    wheels = list(out.glob("queue_engine-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    return target


def test_wheel_ships_migrations_and_sql(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "queue_engine/migrations/0001_initial.sql" in names
    assert "queue_engine/migrations/0001_initial.down.sql" in names
    for path in sorted((REPO_ROOT / "migrations").glob("*.sql")):
        assert f"queue_engine/migrations/{path.name}" in names, path.name
    # The named statements: the engine's catalogue and the demo's.
    for catalogue in ("foundation/sql", "demo/sql"):
        source_sql = sorted((REPO_ROOT / "queue_engine" / catalogue).glob("*.sql"))
        assert source_sql, f"no SQL files in queue_engine/{catalogue}"
        for path in source_sql:
            assert f"queue_engine/{catalogue}/{path.name}" in names, path.name
    assert "queue_engine/__init__.py" in names
    assert "queue_engine/cli/ctl.py" in names
    # The dashboard's templates and vendored static files (htmx with its licence).
    for folder in ("templates", "static"):
        shipped = sorted((REPO_ROOT / "queue_engine" / "web" / folder).iterdir())
        assert shipped, folder
        for path in shipped:
            assert f"queue_engine/web/{folder}/{path.name}" in names, path.name
    # Nothing from the checkout that does not belong in the package.
    assert not any(n.startswith(("tests/", "migrations/", "docs/")) for n in names)


def test_wheel_metadata_and_console_scripts(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        dist_info = next(n.split("/")[0] for n in zf.namelist() if ".dist-info/" in n)
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
        metadata = Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
    assert "queue-ctl = queue_engine.cli.ctl:main" in entry_points
    assert metadata["Name"] == "queue-engine"
    assert metadata["Version"] == __version__  # hatchling read queue_engine/foundation/version.py
    requires = " ".join(metadata.get_all("Requires-Dist") or [])
    for dependency in ("psycopg", "psycopg-pool", "click", "psutil"):
        assert dependency in requires


def test_unpacked_wheel_imports_and_loads_its_own_chain(unpacked: Path, empty_dsn: str) -> None:
    script = textwrap.dedent(
        """
        import os, sys
        from pathlib import Path
        root = Path(sys.argv[1]).resolve()
        import queue_engine
        from queue_engine.foundation import sql as queries
        from queue_engine.foundation.migrate import (
            ENGINE_SCHEMA_VERSION, Migrator, engine_migrations_dir, load_chain,
        )
        assert Path(queue_engine.__file__).resolve().is_relative_to(root), queue_engine.__file__
        folder = engine_migrations_dir().resolve()
        assert folder.is_relative_to(root), folder
        chain = load_chain(folder)
        assert chain[-1].version == ENGINE_SCHEMA_VERSION, chain
        assert "INSERT" in queries.source("enqueue")
        applied = Migrator(os.environ["TEST_DSN"]).up()
        print("ok", len(chain), len(applied), Migrator(os.environ["TEST_DSN"]).current_version())
        """
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_", "PYTHON"))
    }
    env["PYTHONPATH"] = str(unpacked)
    env["TEST_DSN"] = empty_dsn
    result = subprocess.run(
        [sys.executable, "-c", script, str(unpacked)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=unpacked.parent,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "ok",
        str(ENGINE_SCHEMA_VERSION),
        str(ENGINE_SCHEMA_VERSION),
        str(ENGINE_SCHEMA_VERSION),
    ]
