-- PROTOTYPE for the lead (issue 36 §5, bench/flow_control.py --variant): not a
-- migration. concurrency_free() as in concurrency_free_plain_call.sql (no SET
-- clause, no SECURITY DEFINER), and the try-lock first, then ONE query for the
-- limit and the running count: a key another claim holds right now (the rows
-- other workers are claiming at this moment, met by every concurrent scan)
-- costs a try-lock and no query, and a free key one SPI query instead of two.
-- The count still runs after the lock is held, in a query of its own, so it
-- takes a fresh snapshot (the exactness argument of flow-control.md holds).
-- Difference: a key with no limit at all now takes its lock too (harmless:
-- the claim calls this only for keyed rows, and the lock ends with the claim).
CREATE OR REPLACE FUNCTION __SCHEMA__.concurrency_free(p_key text, p_limit integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
AS $$
DECLARE
    free integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(
            '__SCHEMA__.concurrency_limits'::regclass::oid::integer, hashtext(p_key)) THEN
        RETURN 0;
    END IF;
    SELECT coalesce((SELECT c.max_running FROM __SCHEMA__.concurrency_limits c
                     WHERE c.key = p_key), p_limit)
           - (SELECT count(*) FROM __SCHEMA__.jobs r
              WHERE r.concurrency_key = p_key AND r.status = 'running')
      INTO free;
    RETURN greatest(free, 0);
END;
$$;
