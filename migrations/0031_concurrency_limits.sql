-- queue-engine: per-key concurrency limits enforced by the claim (issue 36, §1).
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Why. `lock_key` allows one running job per key. Users need N: at most three
-- loads against one source system, at most ten calls into one partner
-- account. The design is docs/internals/flow-control.md: a running row is the
-- slot (nothing to leak: the recovery that requeues a dead worker's job frees
-- its slot), and the claim statement checks the limit itself, with no extra
-- round trip and no effect on jobs that carry no key.
--
-- What.
-- - jobs.concurrency_key, jobs.concurrency_limit: the job's key and its own
--   limit (NULL, NULL for every plain job; adding nullable columns without a
--   default rewrites nothing). Their rules are checked by the enqueue paths
--   and by concurrency_free below, not by a CHECK: a CHECK on jobs is
--   evaluated on every claim and finish of every job (why 0017 folded the
--   checks into the insert trigger).
-- - A partial index of running keyed jobs: the claim counts a key's running
--   rows through it (at most the limit's number of entries per key).
-- - concurrency_limits: the limits operators set at runtime (`queue-ctl
--   limits set KEY N`), overriding the jobs' own.
-- - concurrency_free(key, limit): how many more jobs of the key may start now.
ALTER TABLE __SCHEMA__.jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit integer;

-- The archive keeps jobs' columns in jobs' order (the archiver moves rows with
-- SELECT *), and jobs_all, whose SELECT * was expanded when 0027 made it,
-- gains the two columns at its end (as 0027 says: a column added to jobs is
-- added to jobs_archive in the same migration and jobs_all recreated).
ALTER TABLE __SCHEMA__.jobs_archive
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit integer;
CREATE OR REPLACE VIEW __SCHEMA__.jobs_all AS
    SELECT * FROM __SCHEMA__.jobs
    UNION ALL
    SELECT * FROM __SCHEMA__.jobs_archive;

CREATE INDEX jobs_running_concurrency_key_idx ON __SCHEMA__.jobs (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status = 'running';

CREATE TABLE __SCHEMA__.concurrency_limits (
    key         text        PRIMARY KEY,
    max_running integer     NOT NULL,
    set_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT concurrency_limits_key_check CHECK (char_length(key) BETWEEN 1 AND 255),
    CONSTRAINT concurrency_limits_max_running_check CHECK (max_running BETWEEN 0 AND 10000)
);

-- How many more jobs of p_key may start now: the effective limit (the
-- operator's row, else p_limit, the candidate job's own) minus the key's
-- running jobs, at least 0; NULL when neither sets a limit.
--
-- Exact under races (docs/internals/flow-control.md): the claims of one key
-- are serialised by a transaction advisory lock, taken with a try so that a
-- claim never waits (a key being claimed by another transaction right now
-- counts as full: its jobs are skipped, like rows SKIP LOCKED skips) and no
-- order of keys can deadlock. The count runs after the lock is held, and a
-- VOLATILE function takes a new snapshot for each query (READ COMMITTED), so
-- it sees every claim of the key that committed before this one got the lock.
-- The lock space: the two-int4 form, keyed by this schema's limits table, so
-- two engine schemas in one database never share a key's lock (a 32-bit hash
-- collision between two keys only makes them take turns).
CREATE FUNCTION __SCHEMA__.concurrency_free(p_key text, p_limit integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lim     integer;
    running integer;
BEGIN
    SELECT c.max_running INTO lim FROM __SCHEMA__.concurrency_limits c WHERE c.key = p_key;
    IF lim IS NULL THEN
        lim := p_limit;
    END IF;
    IF lim IS NULL THEN
        RETURN NULL;
    END IF;
    IF lim <= 0 OR NOT pg_try_advisory_xact_lock(
            '__SCHEMA__.concurrency_limits'::regclass::oid::integer, hashtext(p_key)) THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO running FROM __SCHEMA__.jobs r
    WHERE r.concurrency_key = p_key AND r.status = 'running';
    RETURN greatest(lim - running, 0);
END;
$$;

REVOKE ALL ON FUNCTION __SCHEMA__.concurrency_free(text, integer) FROM PUBLIC;

-- Every role that may read jobs may read the limits (queue-ctl limits list,
-- a monitor); every role that may update jobs (a worker: its claim calls
-- concurrency_free, which reads the limits as the owner) may run the
-- function. As 0029 did for imported_ids; sql/roles.sql grants the same to
-- new roles.
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
        EXECUTE format('GRANT SELECT ON __SCHEMA__.concurrency_limits TO %s', grantee);
    END LOOP;
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.jobs'::regclass
          AND a.privilege_type = 'UPDATE' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION __SCHEMA__.concurrency_free(text, integer) TO %s',
                       grantee);
    END LOOP;
END
$grants$;
