"""A SQLAlchemy 2 session that enqueues in its own transaction (psycopg 3 driver).

The job is inserted on the session's connection, inside the session's
transaction: it commits with the ORM's writes, or disappears with their
rollback. The recipe is :func:`enqueue_in_session`; :func:`create_invoice`
uses it::

    with Session(engine) as session, session.begin():
        invoice, job = create_invoice(session, "ada", 1200)
    # committed: the invoice and its job; an exception in the block: neither

The session's connection is SQLAlchemy's, so the ORM's pool, isolation level
and transaction rules all apply; the engine's tables only need to be in the
same database (the engine's own schema, ``queue_engine`` by default).
"""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy import CheckConstraint, Engine, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from queue_engine import Client, Job

#: The queue and task the worker side (billing_tasks.py) serves.
QUEUE = "billing"
SEND_TASK = "billing.send_invoice"


class Base(DeclarativeBase):
    """The app's ORM base."""


class Invoice(Base):
    """An invoice the app stores; sending it is a job."""

    __tablename__ = "billing_invoices"
    __table_args__ = (CheckConstraint("amount_cents > 0", name="amount_positive"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    customer: Mapped[str]
    amount_cents: Mapped[int]
    status: Mapped[str] = mapped_column(default="open")


def make_engine(dsn: str) -> Engine:
    """An engine on the psycopg 3 driver for a libpq DSN or URL (``postgresql://...``)."""
    return create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))


def enqueue_in_session(session: Session, task: str, **options: Any) -> Job:
    """Enqueue on the session's own connection, inside its current transaction.

    ``session.connection()`` begins the session's transaction if it has not
    begun yet and returns the SQLAlchemy connection it runs on; its
    ``driver_connection`` is the psycopg connection underneath, which a
    :class:`~queue_engine.Client` can enqueue on (``Client(conn=...)`` never
    commits: the session does).
    """
    driver = session.connection().connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    return Client(conn=driver).enqueue(task, **options)


def create_invoice(session: Session, customer: str, amount_cents: int) -> tuple[Invoice, Job]:
    """Store an invoice and enqueue its sending, in the session's transaction."""
    invoice = Invoice(customer=customer, amount_cents=amount_cents)
    session.add(invoice)
    session.flush()  # the INSERT runs now: the invoice has its id (and a bad amount fails here)
    job = enqueue_in_session(session, SEND_TASK, queue=QUEUE, args={"invoice_id": invoice.id})
    return invoice, job
