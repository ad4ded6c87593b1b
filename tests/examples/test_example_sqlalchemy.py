"""examples/sqlalchemy_session: the job commits with the ORM's writes, or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from queue_engine import Client
from queue_engine.testing import assert_enqueued, drain, enqueued_jobs, refute_enqueued


@pytest.fixture
def billing(load_example: Any) -> ModuleType:
    module = load_example("sqlalchemy_session", "billing")
    load_example("sqlalchemy_session", "billing_tasks")
    return module


@pytest.fixture
def engine(dsn: str, billing: ModuleType) -> Iterator[Engine]:
    engine = billing.make_engine(dsn)
    billing.Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


def test_the_job_commits_with_the_session_and_the_worker_uses_the_orm(
    billing: ModuleType, engine: Engine, client: Client
) -> None:
    with Session(engine) as session, session.begin():
        invoice, job = billing.create_invoice(session, "ada", 1200)
        invoice_id = invoice.id
        # Inside the transaction, on its connection, the job is there; elsewhere not yet.
        driver = session.connection().connection.driver_connection
        assert assert_enqueued(driver, task="billing.send_invoice").id == job.id
        refute_enqueued(client, task="billing.send_invoice")

    found = assert_enqueued(client, task="billing.send_invoice", args={"invoice_id": invoice_id})
    assert found.id == job.id and found.queue == "billing"

    [outcome] = drain(client, queue="billing")
    assert (outcome.status, outcome.result) == (
        "succeeded",
        {"invoice_id": invoice_id, "sent": True},
    )
    with Session(engine) as session:
        assert session.get(billing.Invoice, invoice_id).status == "sent"


def test_a_rollback_takes_the_job_with_the_orm_writes(
    billing: ModuleType, engine: Engine, client: Client
) -> None:
    with pytest.raises(IntegrityError), Session(engine) as session, session.begin():
        billing.create_invoice(session, "ada", 1200)  # stored and enqueued ...
        billing.create_invoice(session, "bob", -5)  # ... then a CHECK fails: all rolls back
    assert enqueued_jobs(client, status=None) == []
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(billing.Invoice)) == 0


def test_an_explicit_rollback_too(billing: ModuleType, engine: Engine, client: Client) -> None:
    with Session(engine) as session:
        billing.create_invoice(session, "ada", 1200)  # autobegins the session's transaction
        session.rollback()
    refute_enqueued(client, task="billing.send_invoice", status=None)


def test_sending_twice_sends_once(billing: ModuleType, engine: Engine, client: Client) -> None:
    with Session(engine) as session, session.begin():
        invoice, _ = billing.create_invoice(session, "ada", 1200)
        invoice_id = invoice.id
    client.enqueue("billing.send_invoice", queue="billing", args={"invoice_id": invoice_id})
    results = [o.result for o in drain(client, queue="billing")]
    assert results == [
        {"invoice_id": invoice_id, "sent": True},
        {"invoice_id": invoice_id, "sent": False},
    ]
