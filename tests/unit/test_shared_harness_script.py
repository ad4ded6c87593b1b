"""bench/shared_harness.py: its change to the shared harness's queue-engine adapter.

The change puts queue-engine's worker at the harness's logging level
(WARNING, as every peer's worker); a harness whose adapter moved must make
the script stop with a clear error, not run a copy with the change half made
or missing.
"""

from __future__ import annotations

import importlib.util
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


def test_the_shared_adapter_still_has_the_text_to_change() -> None:
    script = load_script()
    shared = script.DEFAULT_SHARED / "adapters" / "queue_engine.py"
    if not shared.exists():
        pytest.skip(f"no shared harness at {shared} (outside this repository)")
    for _name, old, _new in script.ADAPTER_CHANGES:
        assert shared.read_text().count(old) == 1
