-- queue-engine: the rules of a jobs row are checked when a row is inserted or
-- one of their columns is set, not on every UPDATE. __SCHEMA__ is replaced by
-- the quoted engine schema name. Measured in bench/README.md ("The rules of a
-- row: checked when their columns change", 2026-11-24).
--
-- Postgres checks every CHECK constraint on every UPDATE, whatever columns it
-- sets. Since 0015 the rules are one CHECK calling jobs_row_ok on the whole
-- row: about 20,000 instructions per row written (the row copied into a
-- composite value, a PL/pgSQL call, two regular expressions), paid twice per
-- job by the worker (its claim and its finish write the job), though neither
-- sets a column the rules are about: 40,000 of the ~260,000 server
-- instructions per job of a worker claiming 100 at a time (15 %), and 40,000
-- of the one-at-a-time statement's 1.36 million.
--
-- A BEFORE row trigger that names its columns (UPDATE OF ...) is skipped,
-- without a call, by an UPDATE that sets none of them (the executor compares
-- the statement's target columns once per row: a bitmap test). So the rules
-- become jobs_check_row, BEFORE INSERT OR UPDATE OF the columns they read. Two
-- rules need no such column on UPDATE:
--   * status: every status change goes through jobs_guard_transition, whose
--     pairs (job_transitions) only name valid statuses;
--   * attempt, which claims and finishes set: the guard fires for it too now
--     (UPDATE OF status, attempt) and tests attempt >= 0 in its first IF.
-- The rules, their order and their errors are 0016's: same SQLSTATE (23514,
-- check_violation), message and constraint name in the error's fields. The
-- trigger's name sorts before the guard's, so an UPDATE that breaks a rule and
-- the guard's attempt test names the rule 0016 named (Postgres fires BEFORE
-- row triggers by name). An INSERT checks every rule, as before.
--
-- What changes: the rules are a trigger, not a constraint. pg_constraint no
-- longer lists them; a BEFORE trigger sees the row before later BEFORE
-- triggers (none of the engine's change these columns); and a role that may
-- disable triggers (the table owner, under session_replication_role =
-- replica) skips them, as it skips the guard already.
--
-- Online-safety: dropping the NOT VALID constraint and creating the triggers
-- take an ACCESS EXCLUSIVE lock on jobs for an instant; nothing is scanned.
CREATE FUNCTION __SCHEMA__.jobs_row_rules() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
BEGIN
    -- The common case first. plpgsql builds an expression's executable state
    -- on its first use in each transaction (a function lookup and permission
    -- check per operator), so a row whose optional columns are all NULL (the
    -- usual enqueue, claim and finish) is decided by two small expressions
    -- and never builds the one over the optional columns.
    IF coalesce(jsonb_typeof(NEW.args) = 'object', true)
       AND coalesce(NEW.attempt >= 0 AND NEW.max_attempts BETWEEN 1 AND 1000, true)
       AND coalesce(NEW.priority BETWEEN 0 AND 1000, true)
       AND coalesce(NEW.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                    AND char_length(NEW.queue) <= 64, true)
       AND coalesce(NEW.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                 'canceled', 'lost', 'skipped'), true)
       AND coalesce(NEW.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                    AND char_length(NEW.task) <= 128, true) THEN
        IF NEW.affinity_key IS NULL AND NEW.idempotency_key IS NULL AND NEW.dedupe_key IS NULL
           AND NEW.lock_key IS NULL AND NEW.partition_key IS NULL AND NEW.producer IS NULL
           AND NEW.lease_ttl_s IS NULL AND NEW.timeout_s IS NULL AND NEW.node IS NULL
           AND NEW.workflow_id IS NULL THEN
            RETURN NEW;
        END IF;
        IF coalesce(char_length(NEW.affinity_key) BETWEEN 1 AND 255, true)
           AND coalesce(char_length(NEW.idempotency_key) BETWEEN 1 AND 255
                        AND char_length(NEW.dedupe_key) BETWEEN 1 AND 255
                        AND char_length(NEW.lock_key) BETWEEN 1 AND 255
                        AND char_length(NEW.partition_key) BETWEEN 1 AND 255
                        AND char_length(NEW.producer) BETWEEN 1 AND 255, true)
           AND coalesce(NEW.lease_ttl_s IS NULL OR NEW.lease_ttl_s BETWEEN 1 AND 86400, true)
           AND coalesce(NEW.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                        AND char_length(NEW.node) <= 128, true)
           AND coalesce(NEW.timeout_s IS NULL OR NEW.timeout_s BETWEEN 1 AND 604800, true)
           AND coalesce((NEW.workflow_id IS NULL) = (NEW.node IS NULL), true) THEN
            RETURN NEW;
        END IF;
    END IF;
    -- A rule is broken: name the first, each test as the constraint of
    -- 0001/0004/0007 it replaces, in the order Postgres checked them.
    IF NOT coalesce(char_length(NEW.affinity_key) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_affinity_key_check';
    ELSIF NOT coalesce(jsonb_typeof(NEW.args) = 'object', true) THEN
        broken := 'jobs_args_object_check';
    ELSIF NOT coalesce(NEW.attempt >= 0 AND NEW.max_attempts BETWEEN 1 AND 1000, true) THEN
        broken := 'jobs_attempts_check';
    ELSIF NOT coalesce(char_length(NEW.idempotency_key) BETWEEN 1 AND 255
                       AND char_length(NEW.dedupe_key) BETWEEN 1 AND 255
                       AND char_length(NEW.lock_key) BETWEEN 1 AND 255
                       AND char_length(NEW.partition_key) BETWEEN 1 AND 255
                       AND char_length(NEW.producer) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_keys_length_check';
    ELSIF NOT coalesce(NEW.lease_ttl_s IS NULL OR NEW.lease_ttl_s BETWEEN 1 AND 86400, true) THEN
        broken := 'jobs_lease_ttl_check';
    ELSIF NOT coalesce(NEW.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.node) <= 128, true) THEN
        broken := 'jobs_node_check';
    ELSIF NOT coalesce(NEW.priority BETWEEN 0 AND 1000, true) THEN
        broken := 'jobs_priority_check';
    ELSIF NOT coalesce(NEW.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.queue) <= 64, true) THEN
        broken := 'jobs_queue_check';
    ELSIF NOT coalesce(NEW.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                    'canceled', 'lost', 'skipped'), true) THEN
        broken := 'jobs_status_check';
    ELSIF NOT coalesce(NEW.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.task) <= 128, true) THEN
        broken := 'jobs_task_check';
    ELSIF NOT coalesce(NEW.timeout_s IS NULL OR NEW.timeout_s BETWEEN 1 AND 604800, true) THEN
        broken := 'jobs_timeout_check';
    ELSIF NOT coalesce((NEW.workflow_id IS NULL) = (NEW.node IS NULL), true) THEN
        broken := 'jobs_workflow_node_check';
    ELSE
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%"', broken
        USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'jobs';
END;
$$;

-- 0014's guard, with the attempt rule in its first IF (see above).
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.attempt >= 0 AND (
       OLD.status = NEW.status
       OR (OLD.status = 'queued' AND NEW.status = 'running')
       OR (OLD.status = 'running'
           AND NEW.status IN ('succeeded', 'failed', 'queued', 'canceled', 'skipped'))
       OR (OLD.status = 'waiting' AND NEW.status IN ('running', 'queued'))) THEN
        RETURN NEW;
    END IF;
    IF NEW.attempt < 0 THEN
        RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%"',
                        'jobs_attempts_check'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'jobs_attempts_check',
                  TABLE = 'jobs';
    END IF;
    IF OLD.status <> NEW.status AND NOT EXISTS (
        SELECT 1 FROM __SCHEMA__.job_transitions t
        WHERE t.from_status = OLD.status AND t.to_status = NEW.status
    ) THEN
        RAISE EXCEPTION 'queue-engine: job % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;

ALTER TABLE __SCHEMA__.jobs DROP CONSTRAINT jobs_row_check;
DROP FUNCTION __SCHEMA__.jobs_row_ok(__SCHEMA__.jobs);

CREATE TRIGGER jobs_check_row
    BEFORE INSERT OR UPDATE OF args, max_attempts, priority, queue, task, affinity_key,
        idempotency_key, dedupe_key, lock_key, partition_key, producer, lease_ttl_s,
        timeout_s, node, workflow_id
    ON __SCHEMA__.jobs
    FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.jobs_row_rules();

DROP TRIGGER jobs_guard_transition ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_guard_transition
    BEFORE UPDATE OF status, attempt ON __SCHEMA__.jobs
    FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.jobs_guard_transition();
