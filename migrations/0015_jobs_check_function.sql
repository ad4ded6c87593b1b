-- (Written as 0016 in the brief: another branch takes 0015; renumber at merge.)
-- The jobs table's twelve CHECK constraints in one, whose expression is a call
-- of one plpgsql function (bench/README.md, "Single enqueue: the CHECK
-- constraints"). PostgreSQL rebuilds a table's CHECK expressions for every
-- statement that inserts or updates a row: it reads each one back from its
-- stored text (stringToNode) and plans it. For these twelve that was ~585,000
-- instructions per statement, two thirds of a single enqueue's server work,
-- paid again by every UPDATE. One function call with its column arguments is
-- a small fraction of that to rebuild; the function's own expressions are
-- compiled once per session and it runs one expression per row when the row
-- is valid. The rules are unchanged; a row that breaks one still fails with
-- check_violation (SQLSTATE 23514) naming the constraint it broke, as before.
--
-- Online: the new constraint is added NOT VALID (no scan under the ACCESS
-- EXCLUSIVE lock that ADD CONSTRAINT takes for a moment) and then validated
-- (a scan that does not block reads or writes); the old ones are dropped
-- (catalog only).
CREATE FUNCTION __SCHEMA__.jobs_row_check(
    p_status text, p_queue text, p_task text, p_args jsonb, p_priority smallint,
    p_attempt integer, p_max_attempts integer, p_lease_ttl_s integer, p_timeout_s integer,
    p_idempotency_key text, p_dedupe_key text, p_lock_key text, p_partition_key text,
    p_producer text, p_affinity_key text, p_workflow_id bigint, p_node text
) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    broken text;
BEGIN
    -- Each rule as its CHECK was: it fails only when false (NULL passes).
    -- plpgsql builds an expression's executable state on its first use in each
    -- transaction (a function lookup and permission check per operator), so
    -- the common row, whose optional columns are all NULL, is decided by two
    -- small expressions and never builds the one over the optional columns.
    IF (p_status IN ('waiting', 'queued', 'running', 'succeeded', 'failed', 'canceled',
                     'lost', 'skipped')) IS NOT FALSE
       AND (p_queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' AND char_length(p_queue) <= 64) IS NOT FALSE
       AND (p_task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$' AND char_length(p_task) <= 128) IS NOT FALSE
       AND (jsonb_typeof(p_args) = 'object') IS NOT FALSE
       AND (p_priority BETWEEN 0 AND 1000) IS NOT FALSE
       AND (p_attempt >= 0 AND p_max_attempts BETWEEN 1 AND 1000) IS NOT FALSE
    THEN
        IF p_lease_ttl_s IS NULL AND p_timeout_s IS NULL AND p_idempotency_key IS NULL
           AND p_dedupe_key IS NULL AND p_lock_key IS NULL AND p_partition_key IS NULL
           AND p_producer IS NULL AND p_affinity_key IS NULL AND p_workflow_id IS NULL
           AND p_node IS NULL
        THEN
            RETURN true;
        END IF;
        IF (p_lease_ttl_s IS NULL OR p_lease_ttl_s BETWEEN 1 AND 86400) IS NOT FALSE
           AND (p_timeout_s IS NULL OR p_timeout_s BETWEEN 1 AND 604800) IS NOT FALSE
           AND (char_length(p_idempotency_key) BETWEEN 1 AND 255
                AND char_length(p_dedupe_key) BETWEEN 1 AND 255
                AND char_length(p_lock_key) BETWEEN 1 AND 255
                AND char_length(p_partition_key) BETWEEN 1 AND 255
                AND char_length(p_producer) BETWEEN 1 AND 255) IS NOT FALSE
           AND (char_length(p_affinity_key) BETWEEN 1 AND 255) IS NOT FALSE
           AND ((p_workflow_id IS NULL) = (p_node IS NULL)) IS NOT FALSE
           AND (p_node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                AND char_length(p_node) <= 128) IS NOT FALSE
        THEN
            RETURN true;
        END IF;
    END IF;
    -- Slow path, only for a row that is refused: name the rule it broke.
    broken := CASE
        WHEN (p_status IN ('waiting', 'queued', 'running', 'succeeded', 'failed', 'canceled',
                           'lost', 'skipped')) IS FALSE THEN 'jobs_status_check'
        WHEN (p_queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' AND char_length(p_queue) <= 64) IS FALSE
            THEN 'jobs_queue_check'
        WHEN (p_task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$' AND char_length(p_task) <= 128) IS FALSE
            THEN 'jobs_task_check'
        WHEN (jsonb_typeof(p_args) = 'object') IS FALSE THEN 'jobs_args_object_check'
        WHEN (p_priority BETWEEN 0 AND 1000) IS FALSE THEN 'jobs_priority_check'
        WHEN (p_attempt >= 0 AND p_max_attempts BETWEEN 1 AND 1000) IS FALSE
            THEN 'jobs_attempts_check'
        WHEN (p_lease_ttl_s IS NULL OR p_lease_ttl_s BETWEEN 1 AND 86400) IS FALSE
            THEN 'jobs_lease_ttl_check'
        WHEN (p_timeout_s IS NULL OR p_timeout_s BETWEEN 1 AND 604800) IS FALSE
            THEN 'jobs_timeout_check'
        WHEN (char_length(p_affinity_key) BETWEEN 1 AND 255) IS FALSE
            THEN 'jobs_affinity_key_check'
        WHEN ((p_workflow_id IS NULL) = (p_node IS NULL)) IS FALSE
            THEN 'jobs_workflow_node_check'
        WHEN (p_node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$' AND char_length(p_node) <= 128) IS FALSE
            THEN 'jobs_node_check'
        ELSE 'jobs_keys_length_check'
    END;
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%"', broken
        USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'jobs',
              SCHEMA = '__SCHEMA__';
END;
$$;

-- Every role that inserts or updates jobs runs it (a CHECK's function is called
-- with the caller's rights): granted explicitly, so a database whose default
-- privileges revoke EXECUTE from PUBLIC still lets producers and workers write.
GRANT EXECUTE ON FUNCTION __SCHEMA__.jobs_row_check(
    text, text, text, jsonb, smallint, integer, integer, integer, integer,
    text, text, text, text, text, text, bigint, text
) TO PUBLIC;

ALTER TABLE __SCHEMA__.jobs ADD CONSTRAINT jobs_row_check CHECK (__SCHEMA__.jobs_row_check(
    status, queue, task, args, priority, attempt, max_attempts, lease_ttl_s, timeout_s,
    idempotency_key, dedupe_key, lock_key, partition_key, producer, affinity_key,
    workflow_id, node
)) NOT VALID;
ALTER TABLE __SCHEMA__.jobs VALIDATE CONSTRAINT jobs_row_check;

ALTER TABLE __SCHEMA__.jobs
    DROP CONSTRAINT jobs_status_check,
    DROP CONSTRAINT jobs_queue_check,
    DROP CONSTRAINT jobs_task_check,
    DROP CONSTRAINT jobs_args_object_check,
    DROP CONSTRAINT jobs_priority_check,
    DROP CONSTRAINT jobs_attempts_check,
    DROP CONSTRAINT jobs_lease_ttl_check,
    DROP CONSTRAINT jobs_timeout_check,
    DROP CONSTRAINT jobs_keys_length_check,
    DROP CONSTRAINT jobs_affinity_key_check,
    DROP CONSTRAINT jobs_workflow_node_check,
    DROP CONSTRAINT jobs_node_check;
