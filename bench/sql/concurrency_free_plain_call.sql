-- PROTOTYPE for the lead (issue 36 §5, bench/flow_control.py --variant): not a
-- migration. concurrency_free() of 0031 with the same body, but neither
-- SECURITY DEFINER nor SET search_path: a function with a SET clause saves,
-- sets and restores the GUC on every call (and a new search_path drops the
-- cached namespace path), and SECURITY DEFINER switches the user; the claim
-- calls it once per keyed candidate row. Every object in the body is
-- schema-qualified, and 0031 already grants SELECT on concurrency_limits to
-- every role that may read jobs, so the worker's own rights suffice.
CREATE OR REPLACE FUNCTION __SCHEMA__.concurrency_free(p_key text, p_limit integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
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
