-- Back to the 0001 body of the wake-up trigger (same behaviour, a loop).
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT DISTINCT n.queue FROM new_jobs n WHERE n.status = 'queued' AND n.available_at <= now()
    LOOP
        PERFORM pg_notify(TG_TABLE_SCHEMA || '.jobs', q);
    END LOOP;
    RETURN NULL;
END;
$$;
