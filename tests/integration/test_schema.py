"""Contract: the engine's schema as other programs see it.

The engine can live in any schema, and two engines in two schemas of one
database never see each other's jobs. A plain SQL ``INSERT`` and the SQL
function ``enqueue`` are valid enqueue paths; inserts wake listeners with one
NOTIFY per queue per transaction whose payload is only the queue name, delayed
rows wake nobody, and a row refused (a rule, a unique key) wakes nobody. CHECK constraints and the transition guard refuse bad rows;
the jobs table carries its fillfactor/autovacuum settings; the partial indexes
exist and the claim query uses ``jobs_claimable_idx``. The row rules (a
trigger since migration 0017) run on every INSERT and on an UPDATE of a column
they read, and never for the worker's claim and finish.

Why this module is long: it is the one contract of the table as SQL clients
meet it (columns, rules, guard, triggers, indexes, NOTIFY), one short test
per promise; split by theme, the shared fixtures and row tables would be
repeated in every part.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors

from queue_engine import Client, JobNotFound
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, Migrator

CLAIM_QUERY = (
    "SELECT id FROM queue_engine.jobs WHERE queue='q' AND status='queued' "
    "AND available_at <= now() ORDER BY priority, fair_tag NULLS FIRST, available_at, id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)


@pytest.fixture
def listener(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection listening on the default engine's jobs channel."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute('LISTEN "queue_engine.jobs"')
        yield conn


def drain(
    conn: psycopg.Connection[Any], expected: int = 0, timeout: float = 5.0
) -> list[tuple[str, str]]:
    """Notifications as (channel, payload): wait for ``expected`` of them (up to ``timeout``
    seconds), then keep listening briefly so that any extra one is caught too."""
    notes = []
    if expected:
        notes = list(conn.notifies(timeout=timeout, stop_after=expected))
    notes += list(conn.notifies(timeout=0.25))
    return [(n.channel, n.payload) for n in notes]


# --- two engines in one database --------------------------------------------------------------


def test_engine_in_a_custom_schema_beside_the_default_one(dsn: str, conn) -> None:
    applied = Migrator(dsn, schema="other_engine").up()
    assert [m.version for m in applied] == list(range(1, ENGINE_SCHEMA_VERSION + 1))
    assert Migrator(dsn, schema="other_engine").current_version() == ENGINE_SCHEMA_VERSION
    assert Migrator(dsn).current_version() == ENGINE_SCHEMA_VERSION
    tables = conn.execute(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_name = 'jobs' ORDER BY 1"
    ).fetchall()
    assert tables == [("other_engine", "jobs"), ("queue_engine", "jobs")]
    # Each engine's functions and triggers refer to its own schema only.
    defs = conn.execute(
        "SELECT string_agg(pg_get_functiondef(p.oid), ' ') FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'other_engine'"
    ).fetchone()[0]
    assert '"other_engine".' in defs
    assert "queue_engine." not in defs


def test_two_engines_never_see_each_others_jobs(dsn: str, conn) -> None:
    Migrator(dsn, schema="other_engine").up()
    with Client(dsn) as default, Client(dsn, schema="other_engine") as other:
        d1 = default.enqueue("default.task", queue="shared")
        d2 = default.enqueue("default.task", queue="shared", idempotency_key="same-key")
        o1 = other.enqueue("other.task", queue="shared", idempotency_key="same-key")
        # Same idempotency key in the other engine is a different job.
        assert o1.created
        assert [j.task for j in default.list()] == ["default.task", "default.task"]
        assert [j.task for j in other.list()] == ["other.task"]
        assert other.get(o1.id).task == "other.task"
        assert default.get(d1.id).task == "default.task"
        with pytest.raises(JobNotFound):
            other.get(d2.id)
        other.cancel(o1.id)
        assert default.get(o1.id).status == "queued"
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM queue_engine.jobs), (SELECT count(*) FROM other_engine.jobs)"
    ).fetchone()
    assert counts == (2, 1)


def test_each_engine_notifies_on_its_own_channel(dsn: str, listener) -> None:
    Migrator(dsn, schema="other_engine").up()
    with psycopg.connect(dsn, autocommit=True) as other_listener:
        other_listener.execute('LISTEN "other_engine.jobs"')
        with Client(dsn, schema="other_engine") as other:
            other.enqueue("t", queue="only_other")
        assert drain(other_listener, 1) == [("other_engine.jobs", "only_other")]
    assert drain(listener) == []


def test_downgrading_one_engine_leaves_the_other(dsn: str, conn) -> None:
    Migrator(dsn, schema="other_engine").up()
    Migrator(dsn, schema="other_engine").down(0)
    assert Migrator(dsn).current_version() == ENGINE_SCHEMA_VERSION
    assert conn.execute("SELECT to_regclass('queue_engine.jobs') IS NOT NULL").fetchone()[0]
    assert conn.execute("SELECT to_regclass('other_engine.jobs') IS NULL").fetchone()[0]


# --- SQL-level enqueue ------------------------------------------------------------------------


def test_plain_insert_is_a_valid_enqueue_and_wakes_listeners(dsn: str, conn, listener) -> None:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, args) VALUES ('q','t','{}') "
        "RETURNING id, status, priority, attempt, max_attempts, available_at <= now(), "
        "created_at IS NOT NULL, cancel_requested"
    ).fetchone()
    job_id, *rest = row
    assert isinstance(job_id, int)
    assert rest == ["queued", 100, 0, 5, True, True, False]
    assert drain(listener, 1) == [("queue_engine.jobs", "q")]
    with Client(dsn) as client:
        job = client.get(job_id)
    assert (job.queue, job.task, job.args, job.status) == ("q", "t", {}, "queued")


def test_sql_enqueue_function_returns_an_id_and_honours_idempotency(conn, listener) -> None:
    first = conn.execute("SELECT queue_engine.enqueue('t', '{}'::jsonb, 'q')").fetchone()[0]
    assert isinstance(first, int)
    assert drain(listener, 1) == [("queue_engine.jobs", "q")]

    keyed = conn.execute(
        "SELECT queue_engine.enqueue('t', '{\"n\": 1}'::jsonb, 'q', p_idempotency_key => 'k1')"
    ).fetchone()[0]
    again = conn.execute(
        "SELECT queue_engine.enqueue('t', '{\"n\": 2}'::jsonb, 'q', p_idempotency_key => 'k1')"
    ).fetchone()[0]
    assert again == keyed != first
    assert conn.execute(
        "SELECT count(*), min(args->>'n') FROM queue_engine.jobs WHERE idempotency_key = 'k1'"
    ).fetchone() == (1, "1")


def test_sql_enqueue_function_honours_dedupe_keys_among_active_jobs(conn) -> None:
    enqueue = "SELECT queue_engine.enqueue('t', '{}'::jsonb, 'q', p_dedupe_key => 'd')"
    first = conn.execute(enqueue).fetchone()[0]
    assert conn.execute(enqueue).fetchone()[0] == first
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'canceled', finished_at = now() WHERE id = %s",
        (first,),
    )
    second = conn.execute(enqueue).fetchone()[0]
    assert second != first


def test_sql_enqueue_function_fills_defaults_and_delays(conn) -> None:
    job_id = conn.execute(
        "SELECT queue_engine.enqueue('t', p_run_at => now() + interval '1 hour')"
    ).fetchone()[0]
    row = conn.execute(
        "SELECT queue, args, priority, max_attempts, available_at > now() + interval '59 minutes' "
        "FROM queue_engine.jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row == ("default", {}, 100, 5, True)


# --- notifications ----------------------------------------------------------------------------


def test_bulk_insert_sends_one_notification_per_queue(conn, listener) -> None:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, args) "
        "SELECT CASE WHEN i % 2 = 0 THEN 'bulk.even' ELSE 'bulk.odd' END, 'bulk.task', "
        "jsonb_build_object('i', i, 'secret', 'hunter2') FROM generate_series(1, 50000) AS i"
    )
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == 50000
    notes = drain(listener, 2)
    assert len(notes) == 2
    assert sorted(payload for _, payload in notes) == ["bulk.even", "bulk.odd"]
    assert {channel for channel, _ in notes} == {"queue_engine.jobs"}


def test_delayed_rows_send_no_notification(conn, listener) -> None:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, available_at) "
        "SELECT 'later', 't', now() + interval '1 hour' FROM generate_series(1, 10)"
    )
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, available_at) "
        "VALUES ('later', 't', now() + interval '5 minutes')"
    )
    assert drain(listener) == []
    # A mixed statement only announces the queue that has a runnable row.
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, available_at) VALUES "
        "('later', 't', now() + interval '1 hour'), ('now', 't', now())"
    )
    assert drain(listener, 1) == [("queue_engine.jobs", "now")]


def test_rows_inserted_finished_send_no_notification(conn, listener) -> None:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, finished_at) "
        "VALUES ('done', 't', 'succeeded', now())"
    )
    assert drain(listener) == []


def test_rolled_back_insert_sends_no_notification(dsn: str, listener) -> None:
    with psycopg.connect(dsn) as tx:
        tx.execute("INSERT INTO queue_engine.jobs (queue, task) VALUES ('q', 't')")
        tx.rollback()
    assert drain(listener) == []


#: Statements that fail on their second row after the first was accepted: by
#: the row rules (the trigger that also sends the wake-up, migration 0026) and
#: by a unique index, which Postgres checks after every BEFORE trigger ran.
REFUSED_AFTER_A_GOOD_ROW = {
    "rule": (
        "INSERT INTO queue_engine.jobs (queue, task) VALUES ('refused', 't'), ('refused', '1bad')"
    ),
    "unique key": (
        "INSERT INTO queue_engine.jobs (queue, task, idempotency_key) "
        "VALUES ('refused', 't', 'k-1'), ('refused', 't', 'k-1')"
    ),
}


@pytest.mark.parametrize("refusal", sorted(REFUSED_AFTER_A_GOOD_ROW))
def test_a_statement_refused_in_a_savepoint_sends_no_notification(
    dsn: str, listener, refusal: str
) -> None:
    """The wake-up is sent from a BEFORE row trigger (0026), so a statement that
    fails after a row was accepted must take that row's notification with it,
    even when the transaction goes on past a rolled-back savepoint."""
    with psycopg.connect(dsn) as tx:
        tx.execute("SAVEPOINT before_refusal")
        with pytest.raises((pg_errors.CheckViolation, pg_errors.UniqueViolation)):
            tx.execute(REFUSED_AFTER_A_GOOD_ROW[refusal])
        tx.execute("ROLLBACK TO SAVEPOINT before_refusal")
        tx.execute("INSERT INTO queue_engine.jobs (queue, task) VALUES ('kept', 't')")
        tx.commit()
    assert drain(listener, 1) == [("queue_engine.jobs", "kept")]


# --- constraints ------------------------------------------------------------------------------


BAD_ROWS = [
    ("queue, task", "('bad queue', 't')"),
    ("queue, task", "('-starts-with-dash', 't')"),
    ("queue, task", f"('{'q' * 65}', 't')"),
    ("queue, task", "('', 't')"),
    ("task", "('1starts.with.digit')"),
    ("task", "('has space')"),
    ("task", f"('{'t' * 129}')"),
    ("task, priority", "('t', -1)"),
    ("task, priority", "('t', 1001)"),
    ("task, args", "('t', '[]')"),
    ("task, args", "('t', '\"text\"')"),
    ("task, args", "('t', 'null')"),
    ("task, status", "('t', 'bogus')"),
    ("task, max_attempts", "('t', 0)"),
    ("task, lease_ttl_s", "('t', 0)"),
    ("task, timeout_s", "('t', 0)"),
]

GOOD_ROWS = [
    ("queue, task", f"('{'q' * 64}', 't')"),
    ("queue, task", "('load.cbr:v2-x_y', 'pkg.mod:task-1')"),
    ("task", f"('{'t' * 128}')"),
    ("task, priority", "('t', 0)"),
    ("task, priority", "('t', 1000)"),
    ("task, args", "('t', '{\"a\": [1, 2]}')"),
]


def test_check_constraints_refuse_bad_rows(conn) -> None:
    accepted = []
    for columns, values in BAD_ROWS:
        try:
            conn.execute(f"INSERT INTO queue_engine.jobs ({columns}) VALUES {values}")
        except pg_errors.CheckViolation:
            continue
        accepted.append((columns, values))
    assert accepted == []
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == 0


def test_check_constraints_accept_edge_values(conn) -> None:
    for columns, values in GOOD_ROWS:
        conn.execute(f"INSERT INTO queue_engine.jobs ({columns}) VALUES {values}")
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == len(GOOD_ROWS)


#: One row breaking each rule, and the constraint a violation names. Since
#: migration 0017 the rules are a BEFORE trigger (jobs_check_row, on INSERT and
#: on an UPDATE of a column they read; 0015 made them one CHECK calling a
#: function), which raises the old constraint's error, so the name a caller
#: sees is unchanged.
NAMED_VIOLATIONS = [
    ("queue, task", "('bad queue', 't')", "jobs_queue_check"),
    ("task", "('has space')", "jobs_task_check"),
    ("task, args", "('t', '[]')", "jobs_args_object_check"),
    ("task, priority", "('t', 1001)", "jobs_priority_check"),
    ("task, max_attempts", "('t', 0)", "jobs_attempts_check"),
    ("task, attempt", "('t', -1)", "jobs_attempts_check"),
    ("task, lease_ttl_s", "('t', 0)", "jobs_lease_ttl_check"),
    ("task, timeout_s", "('t', 0)", "jobs_timeout_check"),
    ("task, status", "('t', 'bogus')", "jobs_status_check"),
    ("task, lock_key", "('t', '')", "jobs_keys_length_check"),
    ("task, producer", f"('t', '{'p' * 256}')", "jobs_keys_length_check"),
    ("task, affinity_key", "('t', '')", "jobs_affinity_key_check"),
    ("task, workflow_id", "('t', 1)", "jobs_workflow_node_check"),
    ("task, workflow_id, node", "('t', 1, 'bad node')", "jobs_node_check"),
]


@pytest.mark.parametrize(("columns", "values", "constraint"), NAMED_VIOLATIONS)
def test_check_violation_names_the_broken_rule(
    conn: psycopg.Connection[Any], columns: str, values: str, constraint: str
) -> None:
    with pytest.raises(pg_errors.CheckViolation, match=f'check constraint "{constraint}"') as err:
        conn.execute(f"INSERT INTO queue_engine.jobs ({columns}) VALUES {values}")
    assert err.value.diag.sqlstate == "23514"
    assert err.value.diag.constraint_name == constraint


def test_check_applies_to_updates_of_any_column(conn: psycopg.Connection[Any]) -> None:
    job_id = conn.execute(
        "INSERT INTO queue_engine.jobs (task) VALUES ('t') RETURNING id"
    ).fetchone()[0]
    for assignment, constraint in [
        ("queue = 'bad queue'", "jobs_queue_check"),
        ("attempt = -1", "jobs_attempts_check"),
        ("args = '[]'", "jobs_args_object_check"),
    ]:
        with pytest.raises(pg_errors.CheckViolation) as err:
            conn.execute(f"UPDATE queue_engine.jobs SET {assignment} WHERE id = %s", (job_id,))
        assert err.value.diag.constraint_name == constraint
    assert conn.execute(
        "SELECT queue, attempt, args FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ).fetchone() == ("default", 0, {})


def test_an_update_breaking_two_rules_names_the_first_as_before(conn) -> None:
    """The attempt rule is the guard's (it fires for attempt), the others the row trigger's.

    The row trigger fires first (by name) and checks every rule, so the rule
    named is the one the twelve constraints of 0001 named: the first by name.
    """
    job_id = conn.execute(
        "INSERT INTO queue_engine.jobs (task) VALUES ('t') RETURNING id"
    ).fetchone()[0]
    with pytest.raises(pg_errors.CheckViolation) as err:
        conn.execute(
            "UPDATE queue_engine.jobs SET attempt = -1, affinity_key = '' WHERE id = %s",
            (job_id,),
        )
    assert err.value.diag.constraint_name == "jobs_affinity_key_check"
    with pytest.raises(pg_errors.CheckViolation) as err:
        conn.execute(
            "UPDATE queue_engine.jobs SET attempt = -1, status = 'running' WHERE id = %s",
            (job_id,),
        )
    assert err.value.diag.constraint_name == "jobs_attempts_check"
    assert conn.execute(
        "SELECT status, attempt, affinity_key FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ).fetchone() == ("queued", 0, None)


def test_the_workers_claim_and_finish_do_not_run_the_row_rules(conn) -> None:
    """The point of migration 0017: a claim and a finish set no column the rules read.

    Counted by Postgres itself (track_functions): the INSERT runs the rules
    once, the claim and the finish run the guard (twice) and not the rules.
    """
    from queue_engine.worker import store
    from queue_engine.worker.outcomes import Outcome

    def calls() -> dict[str, int]:
        conn.execute("SELECT pg_stat_force_next_flush()")  # flushed as the session idles
        return dict(
            conn.execute(
                "SELECT f, coalesce((SELECT calls FROM pg_stat_user_functions u"
                "  WHERE u.schemaname = 'queue_engine' AND u.funcname = f), 0)"
                " FROM unnest(ARRAY['jobs_row_rules', 'jobs_guard_transition']) AS f"
            ).fetchall()
        )

    conn.execute("SET track_functions = 'all'")
    before = calls()
    conn.execute("INSERT INTO queue_engine.jobs (task, queue) VALUES ('t', 'rules')")
    claimed = store.finish_and_claim(
        conn, "queue_engine", worker_id="w1", queue="rules", claim_limit=1
    ).claimed
    assert len(claimed) == 1
    done = store.finish_and_claim(
        conn,
        "queue_engine",
        worker_id="w1",
        queue="rules",
        outcomes=[Outcome(claimed[0].id, claimed[0].attempt, "succeeded", "succeeded")],
    )
    assert done.finished == {claimed[0].id: "succeeded"}
    after = calls()
    assert {f: after[f] - before[f] for f in after} == {
        "jobs_row_rules": 1,
        "jobs_guard_transition": 2,
    }


def test_transition_guard_refuses_unlisted_status_changes(conn) -> None:
    job_id = conn.execute(
        "INSERT INTO queue_engine.jobs (task) VALUES ('t') RETURNING id"
    ).fetchone()[0]
    with pytest.raises(pg_errors.CheckViolation, match=r"cannot go from queued to succeeded"):
        conn.execute("UPDATE queue_engine.jobs SET status = 'succeeded' WHERE id = %s", (job_id,))
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (job_id,))
    conn.execute("UPDATE queue_engine.jobs SET status = 'succeeded' WHERE id = %s", (job_id,))
    with pytest.raises(pg_errors.CheckViolation):
        conn.execute("UPDATE queue_engine.jobs SET status = 'queued' WHERE id = %s", (job_id,))
    assert conn.execute(
        "SELECT status FROM queue_engine.jobs WHERE id = %s", (job_id,)
    ).fetchone() == ("succeeded",)


def test_unique_indexes_enforce_keys(conn) -> None:
    conn.execute("INSERT INTO queue_engine.jobs (task, idempotency_key) VALUES ('t', 'i')")
    with pytest.raises(pg_errors.UniqueViolation):
        conn.execute("INSERT INTO queue_engine.jobs (task, idempotency_key) VALUES ('t', 'i')")
    conn.execute(
        "INSERT INTO queue_engine.jobs (task, lock_key, status) VALUES ('t', 'L', 'running')"
    )
    with pytest.raises(pg_errors.UniqueViolation):
        conn.execute(
            "INSERT INTO queue_engine.jobs (task, lock_key, status) VALUES ('t', 'L', 'running')"
        )
    # Queued jobs may share a lock key; finished jobs may share a dedupe key.
    conn.execute("INSERT INTO queue_engine.jobs (task, lock_key) VALUES ('t', 'L'), ('t', 'L')")
    conn.execute(
        "INSERT INTO queue_engine.jobs (task, dedupe_key, status) "
        "VALUES ('t', 'D', 'succeeded'), ('t', 'D', 'failed'), ('t', 'D', 'queued')"
    )
    with pytest.raises(pg_errors.UniqueViolation):
        conn.execute("INSERT INTO queue_engine.jobs (task, dedupe_key) VALUES ('t', 'D')")


# --- storage settings and indexes -----------------------------------------------------------


def test_jobs_table_has_fillfactor_and_autovacuum_settings(conn) -> None:
    options = conn.execute(
        "SELECT reloptions FROM pg_class WHERE oid = 'queue_engine.jobs'::regclass"
    ).fetchone()[0]
    settings = dict(o.split("=", 1) for o in options)
    # 100 since migration 0025: a reserve per page scattered new jobs over a
    # big table's history (tests/integration/test_jobs_fillfactor.py).
    assert settings["fillfactor"] == "100"
    assert float(settings["autovacuum_vacuum_scale_factor"]) < 0.2  # the Postgres default
    assert float(settings["autovacuum_analyze_scale_factor"]) < 0.1
    assert "autovacuum_vacuum_threshold" in settings
    assert "autovacuum_vacuum_insert_scale_factor" in settings
    workers = conn.execute(
        "SELECT reloptions FROM pg_class WHERE oid = 'queue_engine.workers'::regclass"
    ).fetchone()[0]
    assert any(o.startswith("fillfactor=") for o in workers)


def test_partial_indexes_exist(conn) -> None:
    defs = dict(
        conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE schemaname = 'queue_engine' AND tablename = 'jobs'"
        ).fetchall()
    )
    expected_where = {
        "jobs_claimable_idx": "WHERE (status = 'queued'::text)",
        "jobs_running_lease_idx": "WHERE (status = 'running'::text)",
        "jobs_idempotency_key_uidx": "WHERE (idempotency_key IS NOT NULL)",
        "jobs_dedupe_key_uidx": "WHERE ((dedupe_key IS NOT NULL)",
        "jobs_running_lock_key_uidx": "WHERE ((lock_key IS NOT NULL)",
        "jobs_finished_at_idx": "WHERE (finished_at IS NOT NULL)",
    }
    for name, where in expected_where.items():
        assert name in defs, f"missing index {name}"
        assert where in defs[name], defs[name]
    assert "(queue, priority, fair_tag NULLS FIRST, available_at, id)" in defs["jobs_claimable_idx"]
    for unique in (
        "jobs_idempotency_key_uidx",
        "jobs_dedupe_key_uidx",
        "jobs_running_lock_key_uidx",
    ):
        assert defs[unique].startswith("CREATE UNIQUE INDEX")


def test_claim_query_uses_the_claimable_index(conn) -> None:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, finished_at) "
        "SELECT CASE WHEN i % 3 = 0 THEN 'other' ELSE 'q' END, 't', 'succeeded', 1, now() "
        "FROM generate_series(1, 5000) AS i"
    )
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task) SELECT 'q', 't' FROM generate_series(1, 5)"
    )
    conn.execute("ANALYZE queue_engine.jobs")
    plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {CLAIM_QUERY}").fetchall())
    assert "jobs_claimable_idx" in plan, plan
    assert "Seq Scan" not in plan, plan
    claimed = conn.execute(CLAIM_QUERY).fetchone()[0]
    first_queued = conn.execute(
        "SELECT min(id) FROM queue_engine.jobs WHERE status = 'queued'"
    ).fetchone()[0]
    assert claimed == first_queued


#: Valid rows that set optional columns: since migration 0016 the rules decide
#: a row with every optional column NULL by a shorter test, and checks these
#: columns' rules only for a row that sets one; both paths must accept them.
OPTIONAL_COLUMN_ROWS = [
    ("task, lease_ttl_s, timeout_s", "('t', 86400, 604800)"),
    ("task, idempotency_key", f"('t', '{'i' * 255}')"),
    ("task, dedupe_key, lock_key, partition_key", "('t', 'd', 'l', 'p')"),
    ("task, producer, affinity_key", "('t', 'p', 'a')"),
    ("task, workflow_id, node", "('t', 7, 'node_1')"),
]


def test_rows_that_set_optional_columns_pass_and_are_still_checked(conn) -> None:
    for columns, values in OPTIONAL_COLUMN_ROWS:
        conn.execute(f"INSERT INTO queue_engine.jobs ({columns}) VALUES {values}")
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone() == (
        len(OPTIONAL_COLUMN_ROWS),
    )
    # A row with an optional column set that breaks a rule on an always-set column.
    with pytest.raises(pg_errors.CheckViolation) as refused:
        conn.execute(
            "INSERT INTO queue_engine.jobs (task, queue, producer) VALUES ('t', 'bad queue', 'p')"
        )
    assert refused.value.diag.constraint_name == "jobs_queue_check"
    # Setting an optional column to a bad value on an existing row.
    with pytest.raises(pg_errors.CheckViolation) as refused:
        conn.execute("UPDATE queue_engine.jobs SET lease_ttl_s = 0 WHERE producer = 'p'")
    assert refused.value.diag.constraint_name == "jobs_lease_ttl_check"
