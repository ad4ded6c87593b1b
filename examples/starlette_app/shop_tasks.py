"""The worker side of the shop: ``queue-claim-worker --queue=shop --app shop_tasks``."""

from __future__ import annotations

from typing import Any

from queue_engine import JobContext, Permanent, task


@task("shop.confirm_order", queue="shop", max_attempts=5)
def confirm_order(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Mark the order confirmed (idempotent: a second run changes nothing)."""
    with ctx.connect() as conn:
        row = conn.execute(
            "UPDATE shop_orders SET status = 'confirmed' WHERE id = %s RETURNING id",
            (args["order_id"],),
        ).fetchone()
    if row is None:
        # Cannot happen when the order and the job commit together; say so if it does.
        raise Permanent(f"order {args['order_id']} does not exist")
    return {"order_id": args["order_id"], "status": "confirmed"}
