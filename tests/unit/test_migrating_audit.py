"""``docs/migrating/audit.md`` answers every gap of the feature audit, and its links hold.

Issue 35 is done when every row of the feature audit marked MISSING or
PARTIAL is built, or its migration guide says why not. The page makes that
claim checkable: one row per audit id, saying what the gap is now and where
to see it (the code and a test, or the guide's section). This test holds the
page to the audit's list of ids (kept here as data: the audit itself lives
outside the repository), and every link of the page to a file that exists, a
heading that exists in it, and a test function that exists in its file, so a
renamed section or test breaks here rather than in a reader's browser.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MIGRATING = REPO_ROOT / "docs" / "migrating"
PAGE = MIGRATING / "audit.md"

#: Source: ``seed-audit.md``, the feature audit of dataloader (D), pqrun (P) and
#: queue_workflows (Q) against this project (checkout 929408d), kept beside the
#: repository with the seeds it read (``../shared/seed-audit.md`` from a checkout).
#: Every id of its sections 1-3 whose status is MISSING or PARTIAL, in its order:
#: 22 dataloader, 13 pqrun, 14 queue_workflows (its counts table: 32 PARTIAL + 17 MISSING).
AUDIT_IDS = (
    # 1. dataloader
    "D03", "D04", "D05", "D07", "D08", "D10", "D12", "D13", "D15", "D16", "D27",
    "D36", "D37", "D38", "D42", "D44", "D46", "D47", "D49", "D50", "D53", "D58",
    # 2. pqrun
    "P01", "P06", "P07", "P11", "P14", "P16", "P18", "P22", "P23", "P24", "P25",
    "P34", "P38",
    # 3. queue_workflows
    "Q08", "Q15", "Q19", "Q22", "Q23", "Q25", "Q26", "Q27", "Q29", "Q33", "Q38",
    "Q39", "Q40", "Q42",
)  # fmt: skip
#: Its section 5 note on documents that contradicted the settings table.
NOTES = ("M4",)

BUILT = "built"
NOT_BUILT = "decided not to build"
BY_DESIGN = "unchanged by design"
NOW = (BUILT, NOT_BUILT, BY_DESIGN)

ROW = re.compile(r"^\| (?P<id>[DPQM]\d+) \| (?P<what>.+?) \| (?P<now>.+?) \| (?P<where>.+) \|$")
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
TEST_NAME = re.compile(r"::(test_\w+)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def rows() -> list[dict[str, str]]:
    """The page's table rows, cell by cell."""
    found = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            found.append({k: v.strip() for k, v in match.groupdict().items()})
    return found


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it: lower case, punctuation dropped, spaces -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a markdown page (a repeated heading gets -1, -2, ...)."""
    seen: Counter[str] = Counter()
    out = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(1))
            out.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
            seen[base] += 1
    return out


def test_the_slug_is_githubs() -> None:
    assert slug("Custom loops: `pickup()`, `mark_done()`, `mark_error()`") == (
        "custom-loops-pickup-mark_done-mark_error"
    )
    assert slug("dataloader's alert events") == "dataloaders-alert-events"
    assert slug("The claim backoff (`DL_CLAIM_BACKOFF_SEC`)") == (
        "the-claim-backoff-dl_claim_backoff_sec"
    )


def test_one_row_per_gap_of_the_audit_and_no_other() -> None:
    ids = [row["id"] for row in rows()]
    assert len(AUDIT_IDS) == 49 and len(set(AUDIT_IDS)) == 49
    assert ids == [*AUDIT_IDS, *NOTES], "one row per id, in the audit's order"


def test_each_row_says_what_it_is_now_and_the_counts_add_up() -> None:
    counts = Counter(row["now"] for row in rows())
    assert set(counts) <= set(NOW), counts
    text = PAGE.read_text(encoding="utf-8")
    stated = (
        f"{counts[BUILT]} built, {counts[NOT_BUILT]} decided not to build, "
        f"{counts[BY_DESIGN]} unchanged by design ({sum(counts.values())} rows"
    )
    assert stated in " ".join(text.split()), stated


def test_every_link_leads_to_a_file_a_heading_and_a_test_that_exist() -> None:
    broken = []
    for row in rows():
        links = LINK.findall(row["where"])
        assert links, f"{row['id']}: no link in its where cell"
        for text, target in links:
            assert not target.startswith(("http:", "https:")), f"{row['id']}: {target}"
            path_part, _, anchor = target.partition("#")
            path = (MIGRATING / path_part).resolve() if path_part else PAGE
            if not path.exists():
                broken.append(f"{row['id']}: {target} (no such file)")
                continue
            if anchor and anchor not in anchors(path):
                broken.append(f"{row['id']}: {target} (no such heading)")
            for name in TEST_NAME.findall(text):
                if not re.search(rf"^(async )?def {name}\(", path.read_text(), re.MULTILINE):
                    broken.append(f"{row['id']}: {name} not in {path_part}")
    assert not broken, broken


def test_built_rows_name_a_test_and_the_others_a_guides_section() -> None:
    for row in rows():
        targets = LINK.findall(row["where"])
        if row["now"] == BUILT:
            assert any(
                target.startswith("../../tests/") and TEST_NAME.search(text)
                for text, target in targets
            ), f"{row['id']}: built, but no test named"
        else:
            sections = [target for _, target in targets if ".md#" in target]
            assert sections, f"{row['id']}: {row['now']}, but no guide section linked"


def test_the_migrating_index_links_the_page() -> None:
    assert "(audit.md)" in (MIGRATING / "index.md").read_text(encoding="utf-8")
