-- queue-engine: fair share across partitions (tenants) in the claim (issue 36, §2).
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Why. Jobs carry a partition_key (the tenant) since 0001, and it meant
-- nothing: the claim took due jobs by (priority, available_at), so a tenant
-- that enqueued a million jobs made every other tenant's job wait behind all
-- of them. Now, within a queue and priority level, jobs of different
-- partitions are claimed in turn (round-robin), or in proportion to weights
-- operators set at runtime. Design: docs/internals/flow-control.md, §2.
--
-- How: start-time fair queueing with tags computed at insert. Each job with a
-- partition key gets a tag, fair_tag = max(V, last + 1/weight), in the
-- row-rules trigger: V is the queue's fair clock at the job's priority (the
-- smallest tag among its due queued partitioned jobs), last the tag of the
-- partition's latest queued job there (none: V), weight the partition's
-- (default 1).
-- The claim orders by (priority, fair_tag NULLS FIRST, available_at, id),
-- through jobs_claimable_idx rebuilt with fair_tag: the claim statement keeps
-- its shape (one index walk in order, no sort, no dispatcher, no table that
-- can leak or freeze), a new tenant's jobs go in right after the head of the
-- queue, and a tenant's own jobs follow each other one turn apart.
--
-- Plain jobs (no partition key) keep fair_tag NULL, so their order is the
-- order of before: (priority, available_at, id). In a queue that mixes both,
-- plain jobs go first within a priority level (NULLS FIRST).
--
-- What.
-- - jobs.fair_tag (and jobs_archive's, and jobs_all made again as 0031 did).
-- - jobs_claimable_idx rebuilt as (queue, priority, fair_tag NULLS FIRST,
--   available_at, id) WHERE status = 'queued'.
-- - jobs_partition_tag_idx: a partition's queued jobs by tag (its latest tag
--   for the trigger; its depth for `queue-ctl partitions list`). Partial on
--   partition_key IS NOT NULL: plain jobs have no entry. (Not on fair_tag IS
--   NOT NULL: the trigger's probe of the queue's fair clock would match that
--   predicate, and the planner took this index, skipping over partitions and
--   sorting all of their jobs, instead of jobs_claimable_idx's first entry.)
-- - partition_weights: the weights operators set (`queue-ctl partitions
--   weight`). A weight applies to jobs enqueued after it is set.
-- - jobs_row_rules(): 0028's with the tag and, for §1's two columns, the row
--   checks (concurrency_key 1..255 characters, concurrency_limit 1..10000),
--   named jobs_concurrency_key_check and jobs_concurrency_limit_check; the
--   trigger also runs on an UPDATE of those two columns.
--
-- Online-safety: ADD COLUMN without a default rewrites nothing. Rebuilding
-- jobs_claimable_idx and building jobs_partition_tag_idx hold a SHARE lock on
-- jobs for the time of the builds (enqueues and claims wait; on a backlog of
-- a million queued jobs a few seconds). Jobs queued before this migration have
-- no tag: they are claimed as plain jobs are, first in their priority level.
ALTER TABLE __SCHEMA__.jobs ADD COLUMN fair_tag float8;
ALTER TABLE __SCHEMA__.jobs_archive ADD COLUMN fair_tag float8;
CREATE OR REPLACE VIEW __SCHEMA__.jobs_all AS
    SELECT * FROM __SCHEMA__.jobs
    UNION ALL
    SELECT * FROM __SCHEMA__.jobs_archive;

DROP INDEX __SCHEMA__.jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx
    ON __SCHEMA__.jobs (queue, priority, fair_tag NULLS FIRST, available_at, id)
    WHERE status = 'queued';
CREATE INDEX jobs_partition_tag_idx
    ON __SCHEMA__.jobs (queue, partition_key, priority, fair_tag)
    WHERE status = 'queued' AND partition_key IS NOT NULL;

CREATE TABLE __SCHEMA__.partition_weights (
    queue         text        NOT NULL,
    partition_key text        NOT NULL,
    weight        float8      NOT NULL,
    set_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, partition_key),
    CONSTRAINT partition_weights_queue_check CHECK
        (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' AND char_length(queue) <= 64),
    CONSTRAINT partition_weights_key_check CHECK (char_length(partition_key) BETWEEN 1 AND 255),
    CONSTRAINT partition_weights_weight_check CHECK (weight > 0 AND weight <= 1000)
);
COMMENT ON TABLE __SCHEMA__.partition_weights IS
    'Fair-share weights of partitions (tenants) per queue, set by operators; a partition '
    'without a row has weight 1. Applies to jobs enqueued after it is set (migration 0032).';

-- The fair tag of a job of p_partition inserted now into p_queue at
-- p_priority: max(V, last + 1/weight) (the header above). Two index probes
-- and a primary-key probe.
--
-- A function of its own, with enable_seqscan off, because plpgsql keeps a
-- generic plan of each query after a few runs: made while jobs looked empty
-- (a fresh database; the first rows of a bulk enqueue), it scanned all of
-- jobs for each probe, and a bulk enqueue of one partition became quadratic
-- (20,000 jobs in 93 s). The setting costs a save and restore of one GUC per
-- call, paid only by partitioned rows. VOLATILE (the default), so each query
-- takes a new snapshot and sees the rows that the calling INSERT (or COPY)
-- wrote before this one: a bulk enqueue of one partition gets tags one turn
-- apart, not all the same tag.
CREATE FUNCTION __SCHEMA__.fair_tag_of(p_queue text, p_priority smallint, p_partition text)
RETURNS float8
LANGUAGE plpgsql
VOLATILE
SET enable_seqscan = off
AS $$
BEGIN
    -- One query (three probes): each query of a plpgsql function costs a
    -- snapshot and an executor start of its own.
    RETURN greatest(
        coalesce((SELECT h.fair_tag FROM __SCHEMA__.jobs h
                  WHERE h.queue = p_queue AND h.priority = p_priority
                    AND h.status = 'queued' AND h.fair_tag IS NOT NULL
                    AND h.available_at <= now()
                  -- NULLS FIRST: the order of jobs_claimable_idx, so the
                  -- probe reads its first entry past the plain jobs (ASC
                  -- alone means NULLS LAST, and the plan sorted every due
                  -- partitioned job of the priority instead).
                  ORDER BY h.fair_tag NULLS FIRST LIMIT 1), 0),
        (SELECT t.fair_tag FROM __SCHEMA__.jobs t
         WHERE t.queue = p_queue AND t.partition_key = p_partition AND t.priority = p_priority
           AND t.status = 'queued' AND t.fair_tag IS NOT NULL
         ORDER BY t.fair_tag DESC LIMIT 1)
        + 1.0 / coalesce((SELECT w.weight FROM __SCHEMA__.partition_weights w
                          WHERE w.queue = p_queue AND w.partition_key = p_partition), 1.0));
END;
$$;

-- The row rules: 0028's, but for the blocks marked 0032 (the fair tag, and
-- the checks of concurrency_key and concurrency_limit, which 0031 left to the
-- enqueue paths: a raw INSERT with a limit of 0 made a job no claim takes).
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
           AND NEW.workflow_id IS NULL AND NEW.concurrency_key IS NULL
           AND NEW.concurrency_limit IS NULL THEN
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
           AND coalesce((NEW.workflow_id IS NULL) = (NEW.node IS NULL), true)
           AND coalesce(char_length(NEW.concurrency_key) BETWEEN 1 AND 255, true)
           AND coalesce(NEW.concurrency_limit BETWEEN 1 AND 10000, true) THEN
            -- 0032: a partitioned job's fair-share tag (start-time fair
            -- queueing): one turn of 1/weight after its partition's last
            -- queued job, but never before the queue's fair clock at its
            -- priority (the smallest tag of its due partitioned jobs), so a
            -- partition that joins or comes back takes the next turn
            -- (fair_tag_of, above). Only for a row inserted with a partition
            -- key: a plain row never gets here (its partition_key IS NULL in
            -- the first test above). A job going back to queued (retry,
            -- snooze, requeue, a node released) keeps its tag: this trigger
            -- does not run on status changes.
            IF NEW.partition_key IS NOT NULL AND TG_OP = 'INSERT' AND NEW.fair_tag IS NULL
               AND NEW.status IN ('queued', 'waiting') THEN
                NEW.fair_tag := __SCHEMA__.fair_tag_of(NEW.queue, NEW.priority, NEW.partition_key);
            END IF;
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
    ELSIF NOT coalesce(char_length(NEW.concurrency_key) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_concurrency_key_check';
    ELSIF NOT coalesce(NEW.concurrency_limit BETWEEN 1 AND 10000, true) THEN
        broken := 'jobs_concurrency_limit_check';
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

DROP TRIGGER jobs_check_row ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_check_row
    BEFORE INSERT OR UPDATE OF args, max_attempts, priority, queue, task, affinity_key,
        idempotency_key, dedupe_key, lock_key, partition_key, producer, lease_ttl_s,
        timeout_s, node, workflow_id, concurrency_key, concurrency_limit
    ON __SCHEMA__.jobs
    FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.jobs_row_rules();

-- The trigger runs as the role that inserts: every role that may read jobs
-- may read the weights (as 0031 did for concurrency_limits; sql/roles.sql
-- grants the same to new roles).
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
        EXECUTE format('GRANT SELECT ON __SCHEMA__.partition_weights TO %s', grantee);
    END LOOP;
END
$grants$;
