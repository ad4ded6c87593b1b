"""The one way tests run ``queue-ctl``: as a subprocess, the way an operator does.

Every test that drives the command line goes through :func:`queue_ctl`, so
they all see the same thing: the console script of this virtualenv, an
environment without the ``PG*`` and ``QUEUE_ENGINE_*`` variables of whoever
runs the suite (a test that wants one passes it in ``env``), stdin closed (so
``top`` never waits for a key) unless a test gives it text (``stdin``), and
text output captured.

It also gives the click command tree of every console script
(:func:`console_commands`, :func:`walk_commands`), for the tests that hold
options and docs to the real commands.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import click

#: The virtualenv's scripts folder: the console scripts of the package under test.
BIN = Path(sys.executable).parent
QUEUE_CTL = BIN / "queue-ctl"


#: The harness's runtime folder (tests/conftest.py sets it for the session): kept by
#: :func:`clean_env`, so a test's ``queue-ctl up`` is found only by that session's commands.
RUNTIME_DIR_VARIABLE = "QUEUE_ENGINE_RUNTIME_DIR"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without libpq or engine settings, plus ``extra``.

    The one engine variable kept is the session's runtime folder.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}
    if RUNTIME_DIR_VARIABLE in os.environ:
        base[RUNTIME_DIR_VARIABLE] = os.environ[RUNTIME_DIR_VARIABLE]
    return {**base, **(extra or {})}


def queue_ctl(
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``queue-ctl *args`` (write ``"--dsn", dsn`` as on the command line); never raises."""
    if stdin is not None:
        return subprocess.run(
            [str(QUEUE_CTL), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_env(env),
            input=stdin,
        )
    return subprocess.run(
        [str(QUEUE_CTL), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(env),
        stdin=subprocess.DEVNULL,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a run that must succeed; the exit code and stderr otherwise."""
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return result.stdout


def console_commands() -> dict[str, click.Command]:
    """The click command of each console script of ``[project.scripts]``, by script name."""
    from queue_engine.cli.ctl import ctl
    from queue_engine.cli.orchestrator import orchestrator
    from queue_engine.cli.scheduler import scheduler
    from queue_engine.cli.web import web
    from queue_engine.cli.worker import worker

    return {
        "queue-ctl": ctl,
        "queue-claim-worker": worker,
        "queue-orchestrator": orchestrator,
        "queue-scheduler": scheduler,
        "queue-web": web,
    }


def walk_commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    """``command`` and every command under it, each with its path (``queue-ctl workflows show``).

    Subcommands are asked of the group (``list_commands``, ``get_command``), so a group
    that loads its commands only when asked is walked whole too.
    """
    yield path, command
    if isinstance(command, click.Group):
        context = click.Context(command, info_name=path)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            if sub is not None:
                yield from walk_commands(sub, f"{path} {name}")
