"""The worker side of billing: ``queue-claim-worker --queue=billing --app billing_tasks``.

The handler uses the ORM too, through one engine per worker process built on
the database the worker works on (from the handler's connection), so no
second setting is needed; a real app may read its own database URL instead.
"""

from __future__ import annotations

from typing import Any

from billing import Invoice, make_engine
from psycopg.conninfo import make_conninfo
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from queue_engine import JobContext, Permanent, task

_engine: Engine | None = None


def worker_engine(ctx: JobContext) -> Engine:
    """This process's engine, on the worker's database (built on first use)."""
    global _engine
    if _engine is None:
        info = ctx.connect().info
        dsn = make_conninfo(info.dsn, password=info.password) if info.password else info.dsn
        _engine = make_engine(dsn)
    return _engine


@task("billing.send_invoice", queue="billing", max_attempts=5)
def send_invoice(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """ "Send" the invoice and mark it sent; a second run sends nothing (idempotent)."""
    with Session(worker_engine(ctx)) as session, session.begin():
        invoice = session.get(Invoice, args["invoice_id"], with_for_update=True)
        if invoice is None:
            raise Permanent(f"invoice {args['invoice_id']} does not exist")
        if invoice.status == "sent":
            return {"invoice_id": invoice.id, "sent": False}
        # ... render and e-mail it here ...
        invoice.status = "sent"
        return {"invoice_id": invoice.id, "sent": True}
