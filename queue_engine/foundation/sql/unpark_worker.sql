-- Remove the park of one worker process (`queue-ctl unpark --worker ID`).
-- NOTIFYs '*' on the controls channel in the same transaction. Also reports
-- whether the worker row exists at all (an unknown id is refused by the caller,
-- which rolls this back) and the host parks that still hold for it (its host,
-- all queues or its queue): `unpark --host` removes those.
WITH gone AS (
    DELETE FROM __SCHEMA__.worker_parks p
    WHERE p.worker_id = %(worker_id)s
    RETURNING p.parked_at
),
me AS (
    SELECT w.host, w.queue FROM __SCHEMA__.workers w WHERE w.id = %(worker_id)s
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, '*')
)
SELECT EXISTS (SELECT 1 FROM me) AS known,
       (SELECT m.host FROM me m) AS host,
       (SELECT count(*) FROM gone) AS removed,
       coalesce((SELECT array_agg(coalesce(p.queue, '*') ORDER BY p.queue NULLS FIRST)
                 FROM __SCHEMA__.worker_parks p JOIN me m ON p.host = m.host
                 WHERE p.worker_id IS NULL AND (p.queue IS NULL OR p.queue = m.queue)),
                '{}'::text[]) AS host_parks,
       (SELECT count(*) FROM controls) AS notified
