-- An idle worker's safety poll (queue_engine/worker/loop.py): is any job of the
-- queue due? One probe of the claimable index, about a tenth of the server CPU
-- of an empty finish-and-claim (which also evaluates the gate, the rate limit
-- and the outcome CTEs), so a big idle fleet costs the database little; the
-- claim runs only when this says yes (or a NOTIFY woke the worker).
SELECT EXISTS (
    SELECT 1 FROM __SCHEMA__.jobs j
    WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.available_at <= now()
) AS due
