"""``bench/flow_control.py --quick`` runs end to end and prints every table of its figures.

The flow-control bench (issue 36, §5) is what bench/README.md's "Flow control"
figures come from; a bench that broke (a renamed statement tag, a column the
counters no longer find, a scenario that raises half way) would leave those
figures without a way to reproduce them. The quick run is the same code on a
small scale (300 jobs, backlogs of 3,000): it starts its own embedded
PostgreSQL (``pg_stat_statements`` preloaded, which the suite's server is not)
and real worker processes. Numbers are not checked: this is not a speed test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "flow_control.py"
NUMBER = r"[\d,]+(?:\.\d+)?"


def test_quick_run_prints_the_tables_of_every_scenario() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{done.stderr[-4000:]}"
    # keyed: plain against keyed jobs, with the limit's function counted.
    assert (
        "| jobs | K | jobs/s | vs plain | server CPU ms/job | worker CPU ms/job | stmts/job"
        " | stmt ms | concurrency_free calls/job | WAL bytes/job | foreign CPU |"
    ) in out, out
    assert re.search(rf"^\| keyed \| 4 \| {NUMBER} \| [+-]{NUMBER}% \|", out, re.M), out
    # Every keyed claim calls the limit's function; a plain one never does.
    assert re.search(r"^\| plain \| 1 \| .* \| 0\.00 \| [\d,]+ \| \d+% \|$", out, re.M), out
    assert re.search(r"^\| keyed \| 1 \| .* \| 1\.00 \| [\d,]+ \| \d+% \|$", out, re.M), out
    # scale: the four backlogs, the ratio, and the head-of-line walk.
    assert "| backlog | statements | server ms (mean) | vs 10 keys |" in out, out
    for backlog in ("plain", "10 keys", "1,000 keys", "head-of-line"):
        assert f"| {backlog}: " in out, out
    assert re.search(rf"^flat at scale: 1,000 keys / 10 keys = {NUMBER}x", out, re.M), out
    # The first 300 jobs are on 10 full keys, 20 of them running: a claim walks past the 280 queued.
    hol = next(line for line in out.splitlines() if line.startswith("| head-of-line: "))
    assert int(hol.split(" | ")[7].replace(",", "")) >= 280, hol
    # plain: the drains and the single enqueue of the two builds.
    assert "| jobs | K | jobs/s | vs base (this build again) |" in out, out
    assert "| build | p50 | p10 | p50 vs base (this build again) | rounds (p50) |" in out, out
