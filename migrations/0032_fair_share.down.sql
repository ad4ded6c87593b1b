-- queue-engine: undo 0032_fair_share. Partitioned jobs lose their tags (the
-- claim takes them by priority and age again), the operators' weights are
-- dropped, and the row rules are 0028's again (no checks of concurrency_key
-- and concurrency_limit).
DROP TRIGGER jobs_check_row ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_check_row
    BEFORE INSERT OR UPDATE OF args, max_attempts, priority, queue, task, affinity_key,
        idempotency_key, dedupe_key, lock_key, partition_key, producer, lease_ttl_s,
        timeout_s, node, workflow_id
    ON __SCHEMA__.jobs
    FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.jobs_row_rules();
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
        -- The task's defaults (0028) for a row that left queue, priority or
        -- max_attempts out: filled before the wake-up (which names the queue)
        -- and the rules read them. The engine's statements send all three, so
        -- for them this is one test of three NULLs; the lookup runs only for
        -- a plain INSERT (or COPY) that relies on the defaults.
        IF NEW.queue IS NULL OR NEW.priority IS NULL OR NEW.max_attempts IS NULL THEN
            SELECT coalesce(NEW.queue, d.queue), coalesce(NEW.priority, d.priority),
                   coalesce(NEW.max_attempts, d.max_attempts),
                   coalesce(NEW.timeout_s, d.timeout_s), coalesce(NEW.lease_ttl_s, d.lease_ttl_s)
            INTO NEW.queue, NEW.priority, NEW.max_attempts, NEW.timeout_s, NEW.lease_ttl_s
            FROM __SCHEMA__.task_defaults_of(NEW.task) AS d;
        END IF;
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

DROP FUNCTION __SCHEMA__.fair_tag_of(text, smallint, text);
DROP TABLE __SCHEMA__.partition_weights;
DROP INDEX __SCHEMA__.jobs_partition_tag_idx;
DROP INDEX __SCHEMA__.jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON __SCHEMA__.jobs (queue, priority, available_at, id)
    WHERE status = 'queued';
-- jobs_all cannot lose a column in place: made again as 0027 made it, with
-- the grants it had (every role that may read jobs).
DROP VIEW __SCHEMA__.jobs_all;
ALTER TABLE __SCHEMA__.jobs DROP COLUMN fair_tag;
ALTER TABLE __SCHEMA__.jobs_archive DROP COLUMN fair_tag;
CREATE VIEW __SCHEMA__.jobs_all AS
    SELECT * FROM __SCHEMA__.jobs
    UNION ALL
    SELECT * FROM __SCHEMA__.jobs_archive;
COMMENT ON VIEW __SCHEMA__.jobs_all IS
    'Every job: jobs (live, unsuccessful, keyed, workflow nodes, recently succeeded) and jobs_archive.';
DO $grants$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.jobs'::regclass
          AND a.privilege_type = 'SELECT' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT ON __SCHEMA__.jobs_all TO %s', grantee);
    END LOOP;
END
$grants$;
