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

Why the adapter is changed: the harness runs every library "with library
logging at WARNING" (its RESULTS.md, "Fairness notes"): each peer's worker
script calls ``wc.quiet_logging()``. ``queue-claim-worker`` configures its
own logging from ``--log-level`` (INFO by default, a line per job), so the
adapter as written measured queue-engine with a log line per job and the
peers without one (bench/README.md, "Side-by-side runs at the harness's
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


def apply_changes(dest: Path) -> None:
    """Apply :data:`ADAPTER_CHANGES` (a change already applied is left as it is)."""
    for name, old, new in ADAPTER_CHANGES:
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the harness to copy")
    ap.add_argument("--dest", type=Path, default=Path("/tmp/qe-shared-harness"))
    ap.add_argument("run_args", nargs="*", help="arguments for the harness's run.py (after --)")
    args = ap.parse_args()
    dest = args.dest.resolve()
    try:
        copy_harness(args.shared, dest)
        apply_changes(dest)
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
