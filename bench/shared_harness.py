"""Run the shared side-by-side harness (``../shared/bench``) on this checkout. Not a test.

Usage::

    python bench/shared_harness.py --dest /tmp/qe-harness -- \\
        --systems queue_engine,pgqueuer,oban --scenarios drain,drain-best,latency,enqueue \\
        --n 10000 --k 1,4 --rounds 3 --pgbench --pgbench-clients 1,4

The harness is read-only where it lives, so it is run from a copy. This
script makes the copy (once), creates its virtual environments with the
harness's own ``setup.sh`` (once), installs this checkout into the copy's
venv (every time: the build measured is the one on disk), applies the one
change to the queue-engine adapter listed in :data:`ADAPTER_CHANGES`, and
runs the harness's ``run.py`` with the arguments after ``--``.

``--orchestrator-variant`` also adds a second queue-engine system to the
copy, ``queue_engine_orch``: the same workers, plus one ``queue-orchestrator``
per measurement (:data:`VARIANT_ADAPTER`), as queue-engine is deployed. The
harness starts workers only; the engine's maintenance (the reaper, the
vacuumer that keeps the claim index clean during a drain, ...) runs in the
orchestrator, where a peer such as oban runs its plugins inside its worker
nodes. Name both systems (``--systems queue_engine,queue_engine_orch,...``)
to measure the two side by side in one run.

Why the adapter is changed: the harness runs every library "with library
logging at WARNING" (its RESULTS.md, "Fairness notes"): each peer's worker
script calls ``wc.quiet_logging()``. ``queue-claim-worker`` configures its
own logging from ``--log-level`` (INFO by default, a line per job), so the
adapter as written measured queue-engine with a log line per job and the
peers without one (bench/runs/2026-11-27-log.md, "Side-by-side runs at the harness's
logging level").
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SHARED = REPO.parent / "shared" / "bench"

#: (file in the harness, text to find, text to put instead): each must match once.
ADAPTER_CHANGES = [
    (
        "adapters/queue_engine.py",
        '        argv.append(f"--prefetch={concurrency}")\n    return argv\n',
        '        argv.append(f"--prefetch={concurrency}")\n'
        "    # The harness runs every library with its logging at WARNING (RESULTS.md,\n"
        "    # fairness notes); queue-claim-worker logs a line per job at INFO otherwise.\n"
        '    argv += ["--log-level", "WARNING"]\n'
        "    return argv\n",
    ),
]


#: With --orchestrator-variant: the harness's list of systems learns the variant's name.
VARIANT = "queue_engine_orch"
VARIANT_CHANGES = [
    (
        "adapters/__init__.py",
        'KNOWN = ["procrastinate", "pgqueuer", "chancy", "oban", "queue_engine"]\n',
        f'KNOWN = ["procrastinate", "pgqueuer", "chancy", "oban", "queue_engine", "{VARIANT}"]\n',
    ),
]
#: The variant's adapter, written as adapters/queue_engine_orch.py of the copy.
VARIANT_ADAPTER = '''"""queue-engine as deployed: its workers plus one queue-orchestrator per measurement.

Written by queue-engine's bench/shared_harness.py (--orchestrator-variant).
Everything is the queue_engine adapter's but worker_cmd: the first worker of
a measurement (mkdir in the measurement's run directory is the lock) starts
queue-orchestrator beside itself, in the worker's process group, so the
harness's SIGTERM to the group stops both.
"""

from __future__ import annotations

import shlex

from adapters import queue_engine as _base
from adapters.queue_engine import BEST, DIST, PYTHON, REMAINING_SQL, available, client, setup

NAME = "queue_engine_orch"
__all__ = ["BEST", "DIST", "NAME", "PYTHON", "REMAINING_SQL", "available", "client", "setup",
           "worker_cmd"]


def worker_cmd(dsn: str, queue: str, concurrency: int, **opts) -> list[str]:
    argv = _base.worker_cmd(dsn, queue, concurrency, **opts)
    orchestrator = shlex.join(
        [_base._bin("queue-orchestrator"), "--dsn", dsn, "--log-level", "WARNING"]
    )
    lock = '"$BENCH_RUN_DIR/queue-orchestrator"'
    return ["sh", "-c", f"if mkdir {lock} 2>/dev/null; then {orchestrator} & fi; "
                        f"exec {shlex.join(argv)}"]
'''


class HarnessError(Exception):
    """A step that cannot go on; its message is the whole explanation."""


def copy_harness(shared: Path, dest: Path) -> None:
    """Copy the harness to ``dest`` once (its venvs and results stay between runs)."""
    if (dest / "run.py").exists():
        return
    if not (shared / "run.py").exists():
        raise HarnessError(f"no harness at {shared} (give --shared)")
    shutil.copytree(shared, dest, ignore=shutil.ignore_patterns(".venv*", "results", "__pycache__"))
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # the source is read-only


def apply_changes(dest: Path, changes: list[tuple[str, str, str]] | None = None) -> None:
    """Apply ``changes`` (default :data:`ADAPTER_CHANGES`; one already applied is left as it is)."""
    for name, old, new in ADAPTER_CHANGES if changes is None else changes:
        path = dest / name
        text = path.read_text()
        if new in text:
            continue
        if text.count(old) != 1:
            raise HarnessError(
                f"{path}: the text to change is not there once; the harness changed, "
                "update ADAPTER_CHANGES in bench/shared_harness.py"
            )
        path.write_text(text.replace(old, new))


def add_orchestrator_variant(dest: Path) -> None:
    """Add the ``queue_engine_orch`` system to the copy at ``dest`` (see the module docstring)."""
    apply_changes(dest, VARIANT_CHANGES)
    (dest / "adapters" / f"{VARIANT}.py").write_text(VARIANT_ADAPTER)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the harness to copy")
    ap.add_argument("--dest", type=Path, default=Path("/tmp/qe-shared-harness"))
    ap.add_argument(
        "--orchestrator-variant",
        action="store_true",
        help=f"also add system {VARIANT}: the workers plus one queue-orchestrator",
    )
    ap.add_argument("run_args", nargs="*", help="arguments for the harness's run.py (after --)")
    args = ap.parse_args()
    dest = args.dest.resolve()
    try:
        copy_harness(args.shared, dest)
        apply_changes(dest)
        if args.orchestrator_variant:
            add_orchestrator_variant(dest)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    python = dest / ".venv" / "bin" / "python"
    if not python.exists():
        subprocess.run(["bash", str(dest / "setup.sh")], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    # The engine's own dependencies first, only where missing (a new copy's
    # venv lacks cronsim, say); pip's only-if-needed strategy leaves the
    # versions the peers were installed with. Then the build on disk, always.
    subprocess.run([*pip, str(REPO)], check=True)
    subprocess.run([*pip, "--no-deps", "--force-reinstall", str(REPO)], check=True)
    return subprocess.run([str(python), "run.py", *args.run_args], cwd=dest).returncode


if __name__ == "__main__":
    sys.exit(main())
