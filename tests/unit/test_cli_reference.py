"""``docs/reference/cli.md`` is laid out as the real commands are.

The page once filed most ``queue-ctl`` commands (``stats`` to ``workflows``) under
the ``queue-orchestrator`` heading, where nobody looks for them. Held here against
click's command tree (:func:`support.ctl.console_commands`):

- one level-2 heading per console script of ``[project.scripts]``, ``## `queue-ctl```,
  and no other level-2 heading;
- under a script's heading, the commands named in deeper headings are exactly that
  script's commands, hidden ones left out: a heading names a command with a code span
  of its words, arguments in capitals after them (```workflows show ID```; several
  spans may share a heading), so a daemon's section names none;
- a subcommand's heading sits under its group's (``#### `workflows list``` under
  ``### `workflows```).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.ctl import console_commands, walk_commands

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = REPO_ROOT / "docs" / "reference" / "cli.md"


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int


def headings(text: str) -> list[Heading]:
    """The Markdown headings of ``text``, leaving out fenced code blocks (``# a comment``)."""
    found = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"(#{1,6}) (.+)", line)
        if match:
            found.append(Heading(len(match.group(1)), match.group(2).strip(), number))
    return found


def named_commands(heading: str) -> list[str]:
    """The command paths a heading names: each code span's words before its arguments."""
    paths = []
    for span in re.findall(r"`([^`]+)`", heading):
        words = []
        for word in span.split():
            if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
                break  # JOB_ID, NAME=N, --flag, [OPTIONS]: the arguments begin
            words.append(word)
        if words:
            paths.append(" ".join(words))
    return paths


def documented(text: str) -> dict[str, dict[str, int]]:
    """Per console script heading: each command path named under it, with its level."""
    sections: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for heading in headings(text):
        if heading.level == 1:
            current = None
        elif heading.level == 2:
            match = re.fullmatch(r"`([a-z-]+)`", heading.text)
            assert match, f"line {heading.line}: a level-2 heading names a console script"
            assert match.group(1) not in sections, f"line {heading.line}: a second heading"
            current = sections[match.group(1)] = {}
        else:
            assert current is not None, f"line {heading.line}: under no console script"
            for path in named_commands(heading.text):
                assert path not in current, f"line {heading.line}: {path} named twice"
                current[path] = heading.level
    return sections


def real_commands() -> dict[str, set[str]]:
    """Each console script's command paths below the script itself, hidden ones left out."""
    return {
        script: {
            path.removeprefix(script + " ")
            for path, command in walk_commands(root, script)
            if path != script and not command.hidden
        }
        for script, root in console_commands().items()
    }


def test_the_command_trees_are_the_packages_console_scripts() -> None:
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(console_commands()) == set(scripts)


def test_the_page_has_one_heading_per_console_script() -> None:
    assert set(documented(CLI_DOC.read_text())) == set(console_commands())


@pytest.mark.parametrize("script", sorted(console_commands()))
def test_each_command_is_under_its_console_scripts_heading(script: str) -> None:
    named = documented(CLI_DOC.read_text()).get(script, {})
    real = real_commands()[script]
    assert set(named) - real == set(), f"{script}: headings for commands it does not have"
    assert real - set(named) == set(), f"{script}: commands without a heading"


def test_a_subcommands_heading_is_under_its_groups() -> None:
    for script, named in documented(CLI_DOC.read_text()).items():
        for path, level in named.items():
            group = path.rpartition(" ")[0]
            if group:
                assert named.get(group, level) < level, f"{script} {path}"


def test_the_reading_of_a_page() -> None:
    assert named_commands("`workflows provide-input ID NODE VALUE`") == ["workflows provide-input"]
    assert named_commands("`pause QUEUE`, `resume QUEUE`") == ["pause", "resume"]
    assert named_commands("Fleet controls: `scale`, `rate`") == ["scale", "rate"]
    assert named_commands("Global options") == []
    page = "# Ref\n\n## `queue-ctl`\n\n### `a`\n\n```sh\n# `b`\n```\n\n## `queue-web`\n"
    assert documented(page) == {"queue-ctl": {"a": 3}, "queue-web": {}}
    # The layout the page once had: queue-ctl's commands under queue-orchestrator.
    misfiled = (
        "# Ref\n\n## `queue-ctl`\n\n### `migrate`\n\n## `queue-orchestrator`\n\n### `stats`\n"
    )
    assert documented(misfiled)["queue-orchestrator"] == {"stats": 3}
