-- queue-engine: undo 0033_rate_limits_per_key. Jobs lose their weight, rated
-- keys their buckets (their jobs start as fast as workers take them).
-- The status guard as 0020 made it (without the spend).
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.attempt >= 0 AND (
       OLD.status = NEW.status
       OR (OLD.status = 'queued' AND NEW.status = 'running')
       OR (OLD.status = 'running' AND NEW.status = 'queued')
       OR (OLD.status = 'running'
           AND NEW.status IN ('succeeded', 'failed', 'canceled', 'skipped')
           AND (NEW.workflow_id IS NULL
                OR (NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL)))
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
    IF NEW.workflow_id IS NOT NULL AND OLD.status <> NEW.status THEN
        IF NEW.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND OLD.status NOT IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND NOT (NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL) THEN
            RAISE EXCEPTION 'queue-engine: workflow node job % cannot go from % to % without setting finished_at',
                            OLD.id, OLD.status, NEW.status
                USING ERRCODE = 'check_violation',
                      HINT = 'A node''s end sets finished_at, which was NULL (e.g. finished_at = now()).';
        END IF;
        IF OLD.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND NEW.status NOT IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND NOT (NEW.finished_at IS NULL AND OLD.finished_at IS NOT NULL) THEN
            RAISE EXCEPTION 'queue-engine: workflow node job % cannot go from % to % without clearing finished_at',
                            OLD.id, OLD.status, NEW.status
                USING ERRCODE = 'check_violation',
                      HINT = 'A node leaving an end clears finished_at (finished_at = NULL).';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
DROP FUNCTION __SCHEMA__.rate_buckets_spend(text, integer);
DROP FUNCTION __SCHEMA__.concurrency_free(text, integer, integer);
DROP TABLE __SCHEMA__.rate_buckets;
-- jobs_all cannot lose a column in place: made again as 0031's down does.
DROP VIEW __SCHEMA__.jobs_all;
ALTER TABLE __SCHEMA__.jobs DROP COLUMN weight;
ALTER TABLE __SCHEMA__.jobs_archive DROP COLUMN weight;
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
