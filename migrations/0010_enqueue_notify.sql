-- The wake-up trigger of an enqueue, in one statement instead of a loop.
--
-- Same behaviour as 0001: one NOTIFY on "<schema>.jobs" per distinct queue
-- among the inserted rows that are queued and due, whatever the row count.
-- The loop ran a query over the transition table and then one PERFORM per
-- queue, two statements through the executor for the usual single-row
-- enqueue; this runs one. Measured per single enqueue (server backend CPU,
-- bench/enqueue_costs.py): about 40 us of the trigger's 80 us, of 220 us in all.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.jobs', q.queue)
    FROM (
        SELECT DISTINCT n.queue FROM new_jobs n
        WHERE n.status = 'queued' AND n.available_at <= now()
    ) q;
    RETURN NULL;
END;
$$;
