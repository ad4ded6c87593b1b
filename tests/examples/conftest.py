"""What the tests of the recipes under examples/ share: importing an example fresh.

An example is a folder a user copies, with modules of unique names (``shop_app``,
``billing``, ``warm_model``, ``cbr_etl``). ``load_example`` puts the folder on
``sys.path`` and imports the module afresh, so its ``@task`` and ``@periodic``
declarations register during the test and are undone after it (the suite's
``_clean_registry`` for tasks, this fixture for schedules), and module-level
state (a loaded model) starts empty in every test.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from queue_engine.scheduler import schedule_registry

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

LoadExample = Callable[[str, str], ModuleType]


@pytest.fixture
def load_example() -> Iterator[LoadExample]:
    """``load_example(folder, module)``: import ``examples/<folder>/<module>.py`` afresh."""
    schedules_before = {spec.name for spec in schedule_registry.specs()}
    loaded: list[str] = []

    def load(folder: str, module: str) -> ModuleType:
        path = str(EXAMPLES / folder)
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
