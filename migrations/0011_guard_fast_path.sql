-- The transition guard without a function call for the worker's own transitions.
--
-- jobs_guard_transition (0001) ran a PL/pgSQL function for every status change:
-- on each claim (queued -> running) and each finish (running -> succeeded,
-- failed, queued, canceled, skipped), two calls per job and about a tenth of the
-- server time of the worker's finish-and-claim statement (bench/README.md,
-- "Worker CPU per job"). Those pairs are allowed by job_transitions (the
-- invariant tests check every pair against it), so the trigger's WHEN now lets
-- them through inline (a WHEN that calls no function is evaluated without
-- one); every other status change still goes to the function and its table.
-- Dropping and creating a trigger takes a short ACCESS EXCLUSIVE lock on jobs:
-- no scan, no rewrite, whatever the table's size.
DROP TRIGGER jobs_guard_transition ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_guard_transition
    BEFORE UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NOT (
        (OLD.status = 'queued' AND NEW.status = 'running')
        OR (OLD.status = 'running'
            AND NEW.status IN ('succeeded', 'failed', 'queued', 'canceled', 'skipped'))))
    EXECUTE FUNCTION __SCHEMA__.jobs_guard_transition();
