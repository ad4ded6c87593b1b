-- queue-engine: undo 0028_task_defaults. Jobs keep the values they were
-- enqueued with; the published defaults are dropped with their tables.
CREATE OR REPLACE FUNCTION __SCHEMA__.enqueue(
    p_task text,
    p_args jsonb DEFAULT '{}'::jsonb,
    p_queue text DEFAULT 'default',
    p_priority integer DEFAULT 100,
    p_run_at timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT 5,
    p_idempotency_key text DEFAULT NULL,
    p_dedupe_key text DEFAULT NULL,
    p_lock_key text DEFAULT NULL,
    p_timeout_s integer DEFAULT NULL,
    p_lease_ttl_s integer DEFAULT NULL,
    p_partition_key text DEFAULT NULL,
    p_producer text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    INSERT INTO __SCHEMA__.jobs (task, args, queue, priority, available_at, max_attempts,
                                 idempotency_key, dedupe_key, lock_key, timeout_s, lease_ttl_s,
                                 partition_key, producer)
    VALUES (p_task, coalesce(p_args, '{}'::jsonb), p_queue, p_priority, coalesce(p_run_at, now()),
            p_max_attempts, p_idempotency_key, p_dedupe_key, p_lock_key, p_timeout_s,
            p_lease_ttl_s, p_partition_key, p_producer)
    ON CONFLICT DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        SELECT j.id INTO new_id FROM __SCHEMA__.jobs j
        WHERE (p_idempotency_key IS NOT NULL AND j.idempotency_key = p_idempotency_key)
           OR (p_dedupe_key IS NOT NULL AND j.dedupe_key = p_dedupe_key
               AND j.status IN ('queued', 'running'))
        ORDER BY (j.idempotency_key IS NOT DISTINCT FROM p_idempotency_key) DESC
        LIMIT 1;
    END IF;
    RETURN new_id;
END;
$$;

-- The row rules as 0026 wrote them.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_row_rules() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    woke boolean;  -- pg_notify's void, unused
BEGIN
    -- The wake-up (0010's jobs_notify_insert before). An assignment, not
    -- PERFORM: plpgsql evaluates it as a simple expression, where PERFORM
    -- runs a query through the executor (about 8,000 instructions a row).
    -- One CASE rather than an IF and then the call: each expression with a
    -- non-immutable function (now(), pg_notify) costs a command-counter
    -- increment and a snapshot. A rule broken below raises, and the
    -- notification goes with the failed (sub)transaction.
    IF TG_OP = 'INSERT' THEN
        woke := CASE WHEN NEW.status = 'queued' AND NEW.available_at <= now()
                     THEN pg_notify(TG_TABLE_SCHEMA || '.jobs', NEW.queue) IS NULL END;
    END IF;
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

ALTER TABLE __SCHEMA__.jobs
    ALTER COLUMN queue SET DEFAULT 'default',
    ALTER COLUMN priority SET DEFAULT 100,
    ALTER COLUMN max_attempts SET DEFAULT 5;
DROP FUNCTION __SCHEMA__.task_defaults_of(text);
DROP FUNCTION __SCHEMA__.builtin_task_defaults();
DROP TABLE __SCHEMA__.task_publications;
DROP TABLE __SCHEMA__.task_defaults;
