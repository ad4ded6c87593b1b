"""Another checkout's build beside this one, and rounds in alternated order.

On a shared machine, two measurements minutes apart compare the load of those
minutes more than two builds. So an A/B runs both builds in every round, in
ABBA order (:func:`alternated`): a drift of the machine's load hits both alike,
and neither always runs first. The other build is a checkout of its own with its
own venv (``git worktree add ../base COMMIT``, then ``pip install -e
'.[embedded]'`` there), named by its interpreter or one of its console scripts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Build:
    """One build under test: a label and a file of its venv's ``bin`` folder."""

    label: str
    #: The interpreter or a console script of the build's venv, as given.
    path: str

    @classmethod
    def this(cls, label: str = "this") -> Build:
        """The build this interpreter runs."""
        return cls(label, sys.executable)

    @classmethod
    def parse(cls, spec: str, default_label: str = "other") -> Build:
        """``LABEL=PATH`` or ``PATH``; PATH ``.`` (or none) is this build."""
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = default_label, spec
        return cls(label, sys.executable if path in ("", ".") else path)

    @property
    def bin(self) -> Path:
        """The build's ``bin`` folder (the file's, not resolved: a venv's python is a link)."""
        return Path(self.path).parent

    @property
    def python(self) -> str:
        """The build's interpreter."""
        return self.path if Path(self.path).name.startswith("python") else str(self.bin / "python")

    def script(self, name: str) -> str:
        """The build's console script ``name`` (``queue-claim-worker``, say)."""
        return str(self.bin / name)


def alternated(items: Sequence[T], round_index: int) -> list[T]:
    """``items`` in order in even rounds and reversed in odd ones: A B, B A, A B, ..."""
    return list(items) if round_index % 2 == 0 else list(reversed(items))
