-- queue-engine: the audit of operator controls (issue 36, §4: "limits and
-- weights are audited in the events like every other control").
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Why. A control is a row (queues.paused_at, worker_parks, concurrency_limits.
-- set_at): it says what holds now, not who changed it, when, or what it was
-- before. During an incident review "who paused `etl` at 03:12, and what was
-- its scale limit before?" had no answer but the web server's log, and the
-- command line logged nothing at all.
--
-- What. control_events: one row per operator control, written by the
-- operator layer (queue_engine/operator/audit.py) in the same transaction as
-- the control's change, so a control that fails or rolls back leaves no row,
-- and a row always names a change that was committed.
-- - control: what was done. Its vocabulary is documented (docs/reference/
--   schema.md) rather than listed in a CHECK, so a new control (a per-key
--   rate, a partition weight) needs no migration: the CHECK only keeps it
--   one plain lower-case word.
-- - target: what it was done to (a queue, a concurrency key, a worker id, a
--   host), as text: the kinds differ per control.
-- - before, after: the control's state as JSON (NULL: nothing set before, or
--   nothing left after).
-- - actor: who (the HTTP principal's name; for queue-ctl QUEUE_ENGINE_ACTOR,
--   else user@host); via: through what (cli, api, dashboard, library, sql).
--   Never a token, password or DSN.
-- The orchestrator's pruner deletes rows older than
-- QUEUE_ENGINE_RETAIN_CONTROL_EVENTS_S (default 90 days) through the index on at.
CREATE TABLE __SCHEMA__.control_events (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    control text        NOT NULL,
    target  text        NOT NULL,
    before  jsonb,
    after   jsonb,
    actor   text        NOT NULL,
    via     text        NOT NULL,
    CONSTRAINT control_events_control_check CHECK (control ~ '^[a-z][a-z_]{0,62}$'),
    CONSTRAINT control_events_target_check CHECK (char_length(target) BETWEEN 1 AND 1000),
    CONSTRAINT control_events_actor_check CHECK (char_length(actor) BETWEEN 1 AND 255),
    CONSTRAINT control_events_via_check CHECK (via ~ '^[a-z][a-z_]{0,30}$')
);
CREATE INDEX control_events_at_idx ON __SCHEMA__.control_events (at);

-- Whoever may read the jobs' events may read the controls' events (a monitor),
-- as 0029 did for imported_ids; sql/roles.sql grants the same to new roles.
-- Nobody but the owner (the operator's role) writes them.
DO $grants$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.job_events'::regclass
          AND a.privilege_type = 'SELECT' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT ON __SCHEMA__.control_events TO %s', grantee);
    END LOOP;
END
$grants$;
