"""Tasks for the task-defaults process test, imported by ``--app defaults_app``.

``defaults.mail`` declares every default a job can take from its task; the
worker publishes them when it starts, and a job enqueued without options by
``queue-ctl enqueue`` gets them (the test never imports this module).
"""

from __future__ import annotations

from typing import Any

from queue_engine import FixedBackoff, task

QUEUE = "td.mail"
DECLARED = {"queue": QUEUE, "priority": 7, "max_attempts": 3, "timeout_s": 30, "lease_ttl_s": 45}


@task("defaults.mail", retry=FixedBackoff(2), **DECLARED)
def mail(args: dict[str, Any]) -> dict[str, Any]:
    return {"sent_to": args.get("to")}
