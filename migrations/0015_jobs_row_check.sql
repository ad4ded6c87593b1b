-- queue-engine: the CHECKs of jobs cost a function call per row written, not
-- a parse per statement. __SCHEMA__ is replaced by the quoted engine schema
-- name. Measured in bench/README.md ("Worker CPU per job", "CHECK constraints").
--
-- Postgres does not keep a table's CHECK constraints compiled: every statement
-- that writes a table reads each constraint's stored expression again
-- (stringToNode of pg_constraint.conbin), simplifies it (expression_planner)
-- and compiles it, once per ModifyTable node (ExecRelCheck in execMain.c), and
-- it checks every constraint on every UPDATE, whatever columns change. The
-- worker's statement updates jobs twice (finish and claim), so the twelve
-- CHECKs of jobs were read and compiled twice per job: 1.17 million of the
-- plain statement's 2.47 million instructions (callgrind,
-- bench/statement_profile.py), mostly for rules on columns a claim or a
-- finish never writes. Reading a stored expression costs by its size: each
-- operator node, each constant byte by byte (the status list, the patterns).
--
-- The twelve become one, jobs_row_check, whose expression is a call of
-- jobs_row_ok on the whole row: one function node and one variable to read
-- per statement. The function is PL/pgSQL: compiled once per session, its
-- tests cached as simple expressions. It checks exactly the old rules (a NULL
-- result passes, as a CHECK's does), in the order Postgres checked them (by
-- constraint name), and raises the old constraint's error itself: same
-- SQLSTATE (23514, check_violation), same message, same constraint name in the
-- error's fields, so a caller that looks at the name sees no change. Only the
-- DETAIL line with the failing row is gone. EXECUTE stays granted to PUBLIC
-- (a CHECK's function runs as the writing role).
--
-- The price is per row: the PL/pgSQL call costs about 9,000 instructions
-- more than the compiled CHECKs' evaluation did, so a statement writing many
-- rows pays it many times. Measured per job: a one-at-a-time worker (prefetch
-- 1) saves 1,030,000 (-42 %); a plain one-row INSERT saves 480,000 (-50 %); a
-- worker claiming 100 at a time pays 7,000 more (+2.3 %), an INSERT of 1,000
-- rows 8,000 more per row. Break-even is about 60 rows per statement.
--
-- Online-safety: dropping the old constraints and adding the new one NOT VALID
-- takes an ACCESS EXCLUSIVE lock on jobs for an instant (no scan, no rewrite);
-- from then on every row written is checked. The new constraint is left NOT
-- VALID: its rules are the old constraints', which every existing row met,
-- and validating it here would scan the whole table while the migration's
-- transaction holds that lock (workers blocked for the scan: seconds per
-- million jobs). `ALTER TABLE queue_engine.jobs VALIDATE CONSTRAINT
-- jobs_row_check` may be run at any later time: it scans under a SHARE UPDATE
-- EXCLUSIVE lock, which blocks no reader or writer (docs/reference/schema.md).
CREATE FUNCTION __SCHEMA__.jobs_row_ok(r __SCHEMA__.jobs) RETURNS boolean
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

ALTER TABLE __SCHEMA__.jobs
    DROP CONSTRAINT jobs_affinity_key_check,
    DROP CONSTRAINT jobs_args_object_check,
    DROP CONSTRAINT jobs_attempts_check,
    DROP CONSTRAINT jobs_keys_length_check,
    DROP CONSTRAINT jobs_lease_ttl_check,
    DROP CONSTRAINT jobs_node_check,
    DROP CONSTRAINT jobs_priority_check,
    DROP CONSTRAINT jobs_queue_check,
    DROP CONSTRAINT jobs_status_check,
    DROP CONSTRAINT jobs_task_check,
    DROP CONSTRAINT jobs_timeout_check,
    DROP CONSTRAINT jobs_workflow_node_check,
    ADD CONSTRAINT jobs_row_check CHECK (__SCHEMA__.jobs_row_ok(jobs)) NOT VALID;
