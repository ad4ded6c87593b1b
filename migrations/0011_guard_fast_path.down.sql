-- Back to the guard of 0001: the function runs for every status change.
DROP TRIGGER jobs_guard_transition ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_guard_transition
    BEFORE UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION __SCHEMA__.jobs_guard_transition();
