"""Every picture the docs show exists, and comes from the browser tests' run.

An image a page references must be in the repository (a renamed or deleted
screenshot would leave a broken picture); every file in ``docs/images/`` must
be referenced (no stale picture kept by mistake) and be one the browser tests
write when ``QUEUE_ENGINE_DOCS_IMAGES=1`` (docs/contributing.md): its name is
a ``docs`` name in ``tests/browser/``, so refreshing the docs refreshes it.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = REPO_ROOT / "docs" / "images"
#: Markdown images ``![alt](path)`` and HTML ``<img src="path">``.
REFERENCE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)|<img[^>]+src=\"([^\"]+)\"")


def pages() -> list[Path]:
    found = [REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md"]
    for folder in ("docs", "examples", "bench"):
        found += sorted((REPO_ROOT / folder).rglob("*.md"))
    return [p for p in found if p.is_file()]


def references() -> dict[Path, list[str]]:
    """Each page's local image references, resolved to files."""
    out: dict[Path, list[str]] = {}
    for page in pages():
        for match in REFERENCE.finditer(page.read_text()):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z]+:", target):
                continue  # a URL, not a file of the repository
            out.setdefault(page, []).append(target.split("#")[0])
    return out


def test_every_image_the_docs_reference_exists() -> None:
    missing = [
        f"{page.relative_to(REPO_ROOT)}: {target}"
        for page, targets in references().items()
        for target in targets
        if not (page.parent / target).resolve().is_file()
    ]
    assert references(), "no page references an image: the pattern is wrong"
    assert missing == []


def test_every_image_in_docs_images_is_referenced_and_taken_by_the_browser_tests() -> None:
    referenced = {
        (page.parent / target).resolve()
        for page, targets in references().items()
        for target in targets
    }
    browser_tests = "\n".join(p.read_text() for p in (REPO_ROOT / "tests" / "browser").glob("*.py"))
    taken = set(re.findall(r"docs=\"([\w-]+)\"|\"(dashboard-[\w-]+)\"", browser_tests))
    names = {a or b for a, b in taken}
    files = sorted(p for p in IMAGES.iterdir() if p.is_file())
    assert files
    assert [f.name for f in files if f.resolve() not in referenced] == []
    assert [f.name for f in files if f.stem not in names] == []
