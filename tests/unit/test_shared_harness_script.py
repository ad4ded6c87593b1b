"""bench/shared_harness.py: its changes to the shared harness's queue-engine adapter.

The change puts queue-engine's worker at the harness's logging level
(WARNING, as every peer's worker); a harness whose adapter moved must make
the script stop with a clear error, not run a copy with the change half made
or missing. ``--orchestrator-variant`` adds a second system whose first
worker of a measurement starts one ``queue-orchestrator`` beside itself.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "shared_harness.py"

#: worker_cmd's end as ../shared/bench/adapters/queue_engine.py has it.
ADAPTER = """def worker_cmd(dsn: str, queue: str, concurrency: int, **opts) -> list[str]:
    argv = [_bin("queue-claim-worker"), f"--queue={queue}", "--app", "bench_tasks", "--dsn", dsn]
    if concurrency and concurrency > 1:
        argv.append(f"--prefetch={concurrency}")
    return argv
"""


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shared_harness", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def harness(tmp_path: Path, adapter: str) -> Path:
    (tmp_path / "adapters").mkdir(parents=True)
    (tmp_path / "adapters" / "queue_engine.py").write_text(adapter)
    return tmp_path


def worker_argv(adapter_text: str, concurrency: int) -> list[str]:
    namespace: dict[str, object] = {"_bin": lambda name: name}
    exec(adapter_text, namespace)
    worker_cmd = namespace["worker_cmd"]
    assert callable(worker_cmd)
    argv = worker_cmd("postgresql:///x", "bench", concurrency)
    assert isinstance(argv, list)
    return argv


def test_the_adapter_runs_the_worker_at_warning_in_every_scenario(tmp_path: Path) -> None:
    script = load_script()
    dest = harness(tmp_path, ADAPTER)
    script.apply_changes(dest)
    text = (dest / "adapters" / "queue_engine.py").read_text()
    for concurrency in (1, 100):
        argv = worker_argv(text, concurrency)
        assert argv[-2:] == ["--log-level", "WARNING"]
        assert ("--prefetch=100" in argv) is (concurrency == 100)


def test_applying_twice_changes_nothing_more(tmp_path: Path) -> None:
    script = load_script()
    dest = harness(tmp_path, ADAPTER)
    script.apply_changes(dest)
    once = (dest / "adapters" / "queue_engine.py").read_text()
    script.apply_changes(dest)
    assert (dest / "adapters" / "queue_engine.py").read_text() == once
    assert once.count("--log-level") == 1


def test_a_changed_adapter_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    script = load_script()
    moved = ADAPTER.replace("    return argv\n", "    return list(argv)\n")
    dest = harness(tmp_path, moved)
    with pytest.raises(script.HarnessError, match="update ADAPTER_CHANGES"):
        script.apply_changes(dest)
    assert (dest / "adapters" / "queue_engine.py").read_text() == moved


def test_the_copy_of_a_read_only_harness_is_writable(tmp_path: Path) -> None:
    script = load_script()
    shared = harness(tmp_path / "shared", ADAPTER)
    (shared / "run.py").write_text("")
    (shared / ".venv").mkdir()  # the source's own venv is not copied
    for path in [*shared.rglob("*"), shared]:
        path.chmod(path.stat().st_mode & ~0o222)
    dest = tmp_path / "copy"
    script.copy_harness(shared, dest)
    assert not (dest / ".venv").exists()
    for path in (dest, dest / "adapters", dest / "adapters" / "queue_engine.py"):
        assert path.stat().st_mode & 0o200, path
    script.apply_changes(dest)  # writes the adapter
    for path in [*shared.rglob("*"), shared]:
        path.chmod(path.stat().st_mode | 0o200)  # let tmp_path be removed


@pytest.mark.parametrize("changes", ["ADAPTER_CHANGES", "VARIANT_CHANGES"])
def test_the_shared_harness_still_has_the_texts_to_change(changes: str) -> None:
    script = load_script()
    for name, old, _new in getattr(script, changes):
        shared = script.DEFAULT_SHARED / name
        if not shared.exists():
            pytest.skip(f"no shared harness at {shared} (outside this repository)")
        assert shared.read_text().count(old) == 1


#: What the variant imports from the queue_engine adapter, beside worker_cmd and _bin.
ADAPTER_REST = """
NAME = "queue_engine"
DIST = "queue_engine"
PYTHON = None
REMAINING_SQL = "SELECT 0"
BEST: dict[str, object] = {}


def available() -> tuple[bool, str]:
    return True, ""


async def setup(dsn: str) -> None:
    pass


def client(dsn: str) -> None:
    pass
"""


def test_the_orchestrator_variant_starts_one_orchestrator_per_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = load_script()
    root = tmp_path / "harness"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for tool in ("queue-orchestrator", "queue-claim-worker"):
        fake = bin_dir / tool
        fake.write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n')
        fake.chmod(0o755)
    bins = f"\ndef _bin(name: str) -> str:\n    return {str(bin_dir)!r} + '/' + name\n"
    dest = harness(root, ADAPTER + ADAPTER_REST + bins)
    (dest / "adapters" / "__init__.py").write_text(
        'KNOWN = ["procrastinate", "pgqueuer", "chancy", "oban", "queue_engine"]\n'
    )
    script.apply_changes(dest)
    script.add_orchestrator_variant(dest)
    script.add_orchestrator_variant(dest)  # twice: the list names it once
    known = (dest / "adapters" / "__init__.py").read_text()
    assert known.count(script.VARIANT) == 1
    monkeypatch.syspath_prepend(str(dest))
    monkeypatch.delitem(sys.modules, "adapters", raising=False)
    variant = importlib.import_module(f"adapters.{script.VARIANT}")
    assert variant.NAME == script.VARIANT and variant.REMAINING_SQL == "SELECT 0"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for _ in range(2):  # two workers of one measurement
        argv = variant.worker_cmd("postgresql:///x?host=/tmp/a b", "bench", 1)
        subprocess.run(
            argv, env={"BENCH_RUN_DIR": str(run_dir), "PATH": "/bin:/usr/bin"}, check=True
        )
    for _ in range(50):  # the orchestrator runs in the background of the first
        if calls.read_text().count("queue-orchestrator") == 1:
            break
        time.sleep(0.02)
    lines = calls.read_text().splitlines()
    assert (
        lines.count("queue-orchestrator --dsn postgresql:///x?host=/tmp/a b --log-level WARNING")
        == 1
    )
    workers = [line for line in lines if line.startswith("queue-claim-worker")]
    assert (
        workers
        == [
            "queue-claim-worker --queue=bench --app bench_tasks --dsn postgresql:///x?host=/tmp/a b"
            " --log-level WARNING"
        ]
        * 2
    )
