-- Back to 0019: the workflow trigger on UPDATE OF status (every status change
-- of a node calls its function), 0017's guard (no finished_at rule).
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

DROP TRIGGER jobs_workflow_moved ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_workflow_moved
    AFTER UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW WHEN (NEW.workflow_id IS NOT NULL)
    EXECUTE FUNCTION __SCHEMA__.jobs_workflow_moved();
