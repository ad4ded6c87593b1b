-- queue-engine: the workflow trigger only for a node's ends. __SCHEMA__ is
-- replaced by the quoted engine schema name. Design:
-- docs/internals/workflows.md, "Everything happens in the statement that ends
-- a node".
--
-- The trigger fired for UPDATE OF status: a node's claim (queued -> running),
-- hand-over (waiting -> running) and release (waiting -> queued) called the
-- function, which returned at once, about 13,000 instructions each (per node
-- claimed, per child a fan-out releases). It now fires for UPDATE OF
-- finished_at, which those do not name, and the guard makes sure every end and
-- every move out of an end does.
--
-- Measured: bench/README.md, "A node's end without the workflow row (0019,
-- 0020)". Online-safety: DROP and CREATE TRIGGER take a brief SHARE ROW
-- EXCLUSIVE lock on jobs (no other table); CREATE OR REPLACE of the guard.

-- The guard (0017's), with one rule for workflow nodes: a move into a final
-- status sets finished_at (a new, non-NULL value) and a move out of one clears
-- it. Every engine path already does; an operator's SQL that does not is
-- refused with a message saying so, before anything is written. This is what
-- lets the workflow trigger fire for UPDATE OF finished_at (below): every end
-- and every move out of an end then names finished_at, and a node's claim,
-- hand-over and release, which do not, no longer call the trigger function.
-- A plain job has no such rule (its ends need no trigger).
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

-- The workflow trigger fires for UPDATE OF finished_at (it was UPDATE OF
-- status): by the guard's rule every end of a node and every move out of one
-- sets finished_at; a claim, a hand-over and a release do not, and no longer
-- call the function only for it to return at once (about 13,000 instructions
-- each: per node claimed, per child released). A statement that does not set
-- finished_at (a plain claim) no longer prepares the trigger's WHEN either.
-- DROP and CREATE TRIGGER: a brief SHARE ROW EXCLUSIVE lock on jobs.
DROP TRIGGER jobs_workflow_moved ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_workflow_moved
    AFTER UPDATE OF finished_at ON __SCHEMA__.jobs
    FOR EACH ROW WHEN (NEW.workflow_id IS NOT NULL)
    EXECUTE FUNCTION __SCHEMA__.jobs_workflow_moved();
