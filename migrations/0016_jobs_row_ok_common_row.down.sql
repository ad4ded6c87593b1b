-- Back to 0015's jobs_row_ok: all rules in one expression.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_row_ok(r __SCHEMA__.jobs) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
BEGIN
    -- The common case first, as ONE expression: a row that breaks no rule costs one
    -- evaluation (each IF below is an expression of its own, with its own set-up).
    -- The same tests as below, one for one; NOT coalesce(x, true) below is "x is
    -- false", the only result that fails a CHECK, and coalesce(x, true) here its opposite.
    IF coalesce(char_length(r.affinity_key) BETWEEN 1 AND 255, true)
       AND coalesce(jsonb_typeof(r.args) = 'object', true)
       AND coalesce(r.attempt >= 0 AND r.max_attempts BETWEEN 1 AND 1000, true)
       AND coalesce(char_length(r.idempotency_key) BETWEEN 1 AND 255
                    AND char_length(r.dedupe_key) BETWEEN 1 AND 255
                    AND char_length(r.lock_key) BETWEEN 1 AND 255
                    AND char_length(r.partition_key) BETWEEN 1 AND 255
                    AND char_length(r.producer) BETWEEN 1 AND 255, true)
       AND coalesce(r.lease_ttl_s IS NULL OR r.lease_ttl_s BETWEEN 1 AND 86400, true)
       AND coalesce(r.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                    AND char_length(r.node) <= 128, true)
       AND coalesce(r.priority BETWEEN 0 AND 1000, true)
       AND coalesce(r.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                    AND char_length(r.queue) <= 64, true)
       AND coalesce(r.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                 'canceled', 'lost', 'skipped'), true)
       AND coalesce(r.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                    AND char_length(r.task) <= 128, true)
       AND coalesce(r.timeout_s IS NULL OR r.timeout_s BETWEEN 1 AND 604800, true)
       AND coalesce((r.workflow_id IS NULL) = (r.node IS NULL), true) THEN
        RETURN true;
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
