-- Back to 0016: the rules as one CHECK calling jobs_row_ok on every row
-- written, and 0014's guard (UPDATE OF status only). The constraint is added
-- NOT VALID, as 0015 added it: every row already meets its rules, and
-- validating here would scan the table under this ACCESS EXCLUSIVE lock.
DROP TRIGGER jobs_check_row ON __SCHEMA__.jobs;
DROP FUNCTION __SCHEMA__.jobs_row_rules();
CREATE FUNCTION __SCHEMA__.jobs_row_ok(r __SCHEMA__.jobs) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
BEGIN
    -- The common case first. plpgsql builds an expression's executable state
    -- on its first use in each transaction (a function lookup and permission
    -- check per operator), so a row whose optional columns are all NULL (the
    -- usual enqueue, claim and finish) is decided by two small expressions
    -- and never builds the one over the optional columns.
    IF coalesce(jsonb_typeof(r.args) = 'object', true)
       AND coalesce(r.attempt >= 0 AND r.max_attempts BETWEEN 1 AND 1000, true)
       AND coalesce(r.priority BETWEEN 0 AND 1000, true)
       AND coalesce(r.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                    AND char_length(r.queue) <= 64, true)
       AND coalesce(r.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                 'canceled', 'lost', 'skipped'), true)
       AND coalesce(r.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                    AND char_length(r.task) <= 128, true) THEN
        IF r.affinity_key IS NULL AND r.idempotency_key IS NULL AND r.dedupe_key IS NULL
           AND r.lock_key IS NULL AND r.partition_key IS NULL AND r.producer IS NULL
           AND r.lease_ttl_s IS NULL AND r.timeout_s IS NULL AND r.node IS NULL
           AND r.workflow_id IS NULL THEN
            RETURN true;
        END IF;
        IF coalesce(char_length(r.affinity_key) BETWEEN 1 AND 255, true)
           AND coalesce(char_length(r.idempotency_key) BETWEEN 1 AND 255
                        AND char_length(r.dedupe_key) BETWEEN 1 AND 255
                        AND char_length(r.lock_key) BETWEEN 1 AND 255
                        AND char_length(r.partition_key) BETWEEN 1 AND 255
                        AND char_length(r.producer) BETWEEN 1 AND 255, true)
           AND coalesce(r.lease_ttl_s IS NULL OR r.lease_ttl_s BETWEEN 1 AND 86400, true)
           AND coalesce(r.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                        AND char_length(r.node) <= 128, true)
           AND coalesce(r.timeout_s IS NULL OR r.timeout_s BETWEEN 1 AND 604800, true)
           AND coalesce((r.workflow_id IS NULL) = (r.node IS NULL), true) THEN
            RETURN true;
        END IF;
    END IF;
    -- A rule is broken: name the first, each test as the constraint of
    -- 0001/0004/0007 it replaces, in the order Postgres checked them.
    IF NOT coalesce(char_length(r.affinity_key) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_affinity_key_check';
    ELSIF NOT coalesce(jsonb_typeof(r.args) = 'object', true) THEN
        broken := 'jobs_args_object_check';
    ELSIF NOT coalesce(r.attempt >= 0 AND r.max_attempts BETWEEN 1 AND 1000, true) THEN
        broken := 'jobs_attempts_check';
    ELSIF NOT coalesce(char_length(r.idempotency_key) BETWEEN 1 AND 255
                       AND char_length(r.dedupe_key) BETWEEN 1 AND 255
                       AND char_length(r.lock_key) BETWEEN 1 AND 255
                       AND char_length(r.partition_key) BETWEEN 1 AND 255
                       AND char_length(r.producer) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_keys_length_check';
    ELSIF NOT coalesce(r.lease_ttl_s IS NULL OR r.lease_ttl_s BETWEEN 1 AND 86400, true) THEN
        broken := 'jobs_lease_ttl_check';
    ELSIF NOT coalesce(r.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                       AND char_length(r.node) <= 128, true) THEN
        broken := 'jobs_node_check';
    ELSIF NOT coalesce(r.priority BETWEEN 0 AND 1000, true) THEN
        broken := 'jobs_priority_check';
    ELSIF NOT coalesce(r.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                       AND char_length(r.queue) <= 64, true) THEN
        broken := 'jobs_queue_check';
    ELSIF NOT coalesce(r.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                    'canceled', 'lost', 'skipped'), true) THEN
        broken := 'jobs_status_check';
    ELSIF NOT coalesce(r.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                       AND char_length(r.task) <= 128, true) THEN
        broken := 'jobs_task_check';
    ELSIF NOT coalesce(r.timeout_s IS NULL OR r.timeout_s BETWEEN 1 AND 604800, true) THEN
        broken := 'jobs_timeout_check';
    ELSIF NOT coalesce((r.workflow_id IS NULL) = (r.node IS NULL), true) THEN
        broken := 'jobs_workflow_node_check';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%"', broken
        USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'jobs';
END;
$$;

ALTER TABLE __SCHEMA__.jobs
    ADD CONSTRAINT jobs_row_check CHECK (__SCHEMA__.jobs_row_ok(jobs)) NOT VALID;

CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = NEW.status
       OR (OLD.status = 'queued' AND NEW.status = 'running')
       OR (OLD.status = 'running'
           AND NEW.status IN ('succeeded', 'failed', 'queued', 'canceled', 'skipped'))
       OR (OLD.status = 'waiting' AND NEW.status IN ('running', 'queued')) THEN
        RETURN NEW;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM __SCHEMA__.job_transitions t
        WHERE t.from_status = OLD.status AND t.to_status = NEW.status
    ) THEN
        RAISE EXCEPTION 'queue-engine: job % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
DROP TRIGGER jobs_guard_transition ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_guard_transition
    BEFORE UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.jobs_guard_transition();
