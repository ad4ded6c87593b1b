"""``queue-ctl workflows``: start (by name), list, show (the DAG), cancel, retry, provide-input.

Each command is one :class:`~queue_engine.producer.client.Client` call on the group's
connection; the drawing is :mod:`queue_engine.cli.workflow_render` (pure). Bad
input is one line and exit 2 (click's usage errors, a ``ValidationError``), a
request that does not apply (no such workflow, an input node not ready yet)
one line and exit 1, as for the job commands.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from queue_engine.cli import workflow_render
from queue_engine.cli.common import color_option, use_color
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json
from queue_engine.foundation.errors import InvalidTransition, ValidationError
from queue_engine.producer.workflows.model import WorkflowState
from queue_engine.producer.workflows.operations import LIST_LIMIT_MAX

#: A workflow id as the schema stores it (bigint): a larger number is a usage
#: error here, not a server error (exit 70) later.
WORKFLOW_ID = click.IntRange(1, 2**63 - 1)


def read_value(raw: str, *, label: str = "VALUE") -> Any:
    """VALUE of ``provide-input``: JSON text, ``@file`` for a file's content, ``-`` for stdin."""
    source = label
    if raw == "-":
        source, raw = "stdin", sys.stdin.read()
    elif raw.startswith("@"):
        path = Path(raw[1:])
        try:
            raw = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ValidationError(f"cannot read {label} from {path}: {reason}") from None
        source = str(path)
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{label} ({source}) is not valid JSON: {exc.msg} at position {exc.pos} "
            "(a string is quoted: '\"yes\"')"
        ) from None


def _now() -> datetime:
    return datetime.now(UTC)


@click.group(name="workflows")
def workflows() -> None:
    """Workflows (DAGs of jobs): list, show the DAG, cancel, retry, provide an input."""


@workflows.command(name="list")
@click.option(
    "--state", type=click.Choice([s.value for s in WorkflowState]), help="Only this state."
)
@click.option("--name", help="Only workflows of this name.")
@click.option("--limit", type=click.IntRange(1, LIST_LIMIT_MAX), default=50, show_default=True)
@click.option(
    "--before-id",
    type=WORKFLOW_ID,
    help="Only workflows older than this id (the next page: the last id shown).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the workflows as a JSON array.")
@color_option
@pass_cli
def list_cmd(
    cli: CliContext,
    state: str | None,
    name: str | None,
    limit: int,
    before_id: int | None,
    as_json: bool,
    color: str,
) -> None:
    """List workflows, newest first, with their node counts."""
    with cli.client() as client:
        rows = client.list_workflows(state=state, name=name, limit=limit, before_id=before_id)
    if as_json:
        print_json([w.to_dict() for w in rows])
        return
    coloured = use_color(color)
    # color=coloured: click.echo strips escape codes off a pipe unless told otherwise.
    click.echo("\n".join(workflow_render.list_lines(rows, _now(), color=coloured)), color=coloured)
    if not rows:
        click.echo("(no workflows)")
    elif len(rows) == limit:
        click.echo(f"(more may follow: --before-id {rows[-1].id})", err=True)


@workflows.command(name="show")
@click.argument("workflow_id", type=WORKFLOW_ID)
@click.option(
    "--all",
    "expand",
    is_flag=True,
    help=f"One line per node (default: {workflow_render.COLLAPSE_AT} or more "
    "siblings with the same task and parents share one line).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the workflow and its nodes as JSON.")
@color_option
@pass_cli
def show_cmd(cli: CliContext, workflow_id: int, expand: bool, as_json: bool, color: str) -> None:
    """Show a workflow and draw its DAG.

    Its state and counts, then its nodes by level, each with its state,
    attempt, duration and the parents it comes after.
    """
    with cli.client() as client:
        info = client.get_workflow(workflow_id)
        nodes = client.workflow_nodes(workflow_id)
    if as_json:
        print_json({**info.to_dict(), "nodes": [n.to_dict() for n in nodes]})
        return
    coloured = use_color(color)
    lines = workflow_render.show_lines(
        info,
        nodes,
        _now(),
        color=coloured,
        collapse_at=0 if expand else workflow_render.COLLAPSE_AT,
    )
    click.echo("\n".join(lines), color=coloured)


@workflows.command(name="start")
@click.argument("name")
@click.option(
    "--app",
    required=True,
    help="Module declaring the workflow provider (@queue_engine.workflow(NAME)).",
)
@click.option(
    "--params",
    default="{}",
    show_default=True,
    help="The provider's params: a JSON object, @FILE, or - (stdin).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the workflow as JSON.")
@pass_cli
def start_cmd(cli: CliContext, name: str, app: str, params: str, as_json: bool) -> None:
    """Start the workflow a named provider builds from --params.

    The provider is a function of the app module, registered with
    @queue_engine.workflow(NAME); it returns the Workflow to start. With the
    workflow's idempotency key naming an existing one, that one is shown and
    nothing is written.
    """
    parsed = read_value(params, label="--params")
    if not isinstance(parsed, dict):
        raise ValidationError(f"--params must be a JSON object, got {type(parsed).__name__}")
    from queue_engine.producer.tasks import import_app  # only this command imports app code

    import_app(app)
    with cli.client() as client:
        info = client.start_workflow(name, parsed)
    if as_json:
        print_json({**info.to_dict(), "created": info.created})
        return
    verb = "started" if info.created else "already exists (its idempotency key)"
    click.echo(f"workflow {info.id} {info.name}: {verb}; {info.node_count} node(s), {info.state}")


@workflows.command(name="cancel")
@click.argument("workflow_id", type=WORKFLOW_ID)
@pass_cli
def cancel_cmd(cli: CliContext, workflow_id: int) -> None:
    """Cancel a workflow's unfinished nodes.

    Waiting and queued nodes are canceled at once; running nodes are asked to
    stop at their next checkpoint. A workflow that has ended is refused (exit 1).
    """
    with cli.client() as client:
        # An ended workflow is refused by the client (InvalidTransition: exit 1).
        canceled, stopping = client.cancel_workflow(
            workflow_id, message="workflow canceled with queue-ctl"
        )
    text = f"workflow {workflow_id}: {canceled} node(s) canceled"
    if stopping:
        text += f", {stopping} running node(s) asked to stop at their next checkpoint"
    click.echo(text)


@workflows.command(name="retry")
@click.argument("workflow_id", type=WORKFLOW_ID)
@pass_cli
def retry_cmd(cli: CliContext, workflow_id: int) -> None:
    """Re-run a workflow's failed, canceled and lost nodes.

    Their descendants that did not succeed run again too; succeeded nodes do
    not. Only an ended workflow is retried: a running one is refused (exit 1).
    """
    with cli.client() as client:
        rerun = client.retry_workflow(workflow_id, message="workflow retried with queue-ctl")
        info = client.get_workflow(workflow_id)
    if not rerun:
        raise InvalidTransition(
            f"workflow {workflow_id} is {info.state} with no failed, canceled or lost node: "
            "nothing to re-run"
        )
    click.echo(f"workflow {workflow_id}: {rerun} node(s) to run again; it is {info.state}")


@workflows.command(name="provide-input")
@click.argument("workflow_id", type=WORKFLOW_ID)
@click.argument("node")
@click.argument("value")
@pass_cli
def provide_input_cmd(cli: CliContext, workflow_id: int, node: str, value: str) -> None:
    """Give an input node its value.

    VALUE is JSON ('{"by": "ana"}', '"yes"', true); @FILE reads it from a
    file, - from stdin (a negative number goes after --: ... NODE -- -1). The
    value becomes the node's result and its children are released. A second
    call changes nothing and says so (exit 0).
    """
    parsed = read_value(value)
    status = "succeeded"
    with cli.client() as client:
        provided = client.provide_input(workflow_id, node, parsed)
        if not provided:
            status = next(
                (n.status for n in client.workflow_nodes(workflow_id) if n.node == node), "?"
            )
    if provided:
        click.echo(f"workflow {workflow_id}: input {node} provided; its children are released")
    elif status == "succeeded":
        click.echo(f"workflow {workflow_id}: input {node} was already provided; nothing changed")
    else:
        click.echo(f"workflow {workflow_id}: input {node} already ended {status}; nothing changed")
