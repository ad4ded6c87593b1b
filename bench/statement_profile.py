"""Where one finish-and-claim statement's server instructions go (callgrind). Not a test.

Usage::

    python bench/statement_profile.py --out /tmp/fc.callgrind     # plain, prefetch 1
    callgrind_annotate --inclusive=yes /tmp/fc.callgrind | head -80

``statement_cost.py`` gives one figure per variant (two runs, N2 - N1
statements, start-up cancelling out); this keeps the callgrind file of one run
so that ``callgrind_annotate`` can break a statement down by function. The run
is the same (a data folder with queued no-op jobs, PostgreSQL in single-user
mode, the worker's session settings, the plain statement PREPAREd and
EXECUTEd ``--n`` times, each finishing the job the previous one claimed), but
instructions are only collected inside ``exec_simple_query`` (``--toggle-collect``):
start-up and shutdown are left out, and the once-only SETs and PREPARE are
under 0.1 % at the default N. ``--ddl FILE`` applies SQL to the folder first
(a candidate migration, say), so a cut can be profiled before it is written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from statement_cost import prepare_folder, script, statement

from queue_engine.worker import store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="statements")
    parser.add_argument("--out", required=True, help="callgrind output file to keep")
    parser.add_argument("--ddl", help="SQL file applied to the data folder first")
    parser.add_argument(
        "--variant",
        default="",
        help="statement tags, comma-separated (default: a worker's at this --prefetch)",
    )
    parser.add_argument("--prefetch", type=int, default=1, help="jobs claimed per statement")
    parser.add_argument("--sql", help="a candidate finish_and_claim_jobs.sql to profile instead")
    opts = parser.parse_args()
    ddl = Path(opts.ddl).read_text().replace("__SCHEMA__", "queue_engine") if opts.ddl else ""
    tags = (
        tuple(opts.variant.split(","))
        if opts.variant
        else store.worker_tags(opts.prefetch, opts.prefetch)
    )
    worker = statement(tags, opts.sql)
    folder = Path(tempfile.mkdtemp(prefix="qe-stmtprof-"))
    folder.chmod(0o777)
    try:
        pg, _ = prepare_folder(folder, ddl, (opts.n + 10) * opts.prefetch)
        argv = [
            "valgrind",
            "--tool=callgrind",
            "--toggle-collect=exec_simple_query",
            f"--callgrind-out-file={os.path.abspath(opts.out)}",
            str(pg.bin_dir / "postgres"),
            "--single",
            "-j",
            "-D",
            str(pg.data_dir),
            "qe_stmt",
        ]
        kwargs = {"user": pg.user} if pg.user else {}
        done = subprocess.run(
            argv,
            input=script(worker.text, worker.names, opts.n, opts.prefetch),
            capture_output=True,
            text=True,
            check=False,
            **kwargs,
        )
        shutil.rmtree(pg.socket_dir, ignore_errors=True)
        if "ERROR" in done.stdout + done.stderr:
            print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
            raise SystemExit("single-user run failed")
        collected = [line for line in done.stderr.splitlines() if "Collected :" in line]
        print(f"{collected[0].split(':', 1)[1].strip()} instructions in {opts.n} statements")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
