"""The package's version, written once.

Everything that states it reads this module: hatchling at build time
(``[tool.hatch.version]`` in pyproject.toml, so the wheel's metadata says the
same), ``queue_engine.__version__``, every console script's ``--version``, the
daemons' workers-row telemetry and queue-web's ``/info``. It needs no installed
metadata, which would be stale in a checkout not reinstalled since the version
changed, and imports nothing, so any layer may read it.
"""

from __future__ import annotations

__version__ = "0.1.0"
