-- PROTOTYPE for the lead (issue 36 §5, bench/flow_control.py --variant): not a
-- migration, and not a correct function: a bound. concurrency_free() as in
-- concurrency_free_lock_first.sql without the lookup of concurrency_limits,
-- i.e. what a keyed claim would cost if the function knew that no operator
-- limit is set (say, a flag the claim's gate reads once per statement, set
-- by `queue-ctl limits set` and cleared by the last `limits clear`).
CREATE OR REPLACE FUNCTION __SCHEMA__.concurrency_free(p_key text, p_limit integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
AS $$
DECLARE
    running integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(
            '__SCHEMA__.concurrency_limits'::regclass::oid::integer, hashtext(p_key)) THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO running FROM __SCHEMA__.jobs r
    WHERE r.concurrency_key = p_key AND r.status = 'running';
    RETURN greatest(p_limit - running, 0);
END;
$$;
