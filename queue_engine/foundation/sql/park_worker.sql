-- Park one worker process (`queue-ctl park --worker ID`): it stays alive and
-- heartbeats but claims nothing until `queue-ctl unpark --worker ID`; the row
-- goes with the worker's row (ON DELETE CASCADE). Only a live worker (role
-- worker, not stopped, not flagged dead) can be parked: no row comes back
-- otherwise, nothing is written and nothing is NOTIFYed. Parking twice keeps the
-- first row and its parked_at. NOTIFYs '*' on the controls channel in the same
-- transaction (the worker re-reads its controls at once).
WITH target AS (
    SELECT w.id, w.host, w.queue FROM __SCHEMA__.workers w
    WHERE w.id = %(worker_id)s AND w.role = 'worker'
      AND w.stopped_at IS NULL AND w.flagged_dead_at IS NULL
),
ins AS (
    INSERT INTO __SCHEMA__.worker_parks (worker_id)
    SELECT t.id FROM target t
    ON CONFLICT (worker_id) WHERE worker_id IS NOT NULL DO NOTHING
    RETURNING parked_at
),
prev AS (
    SELECT p.parked_at FROM __SCHEMA__.worker_parks p WHERE p.worker_id = %(worker_id)s
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, '*') WHERE EXISTS (SELECT 1 FROM target)
)
SELECT t.host, t.queue,
       EXISTS (SELECT 1 FROM ins) AS created,
       coalesce((SELECT i.parked_at FROM ins i), (SELECT p.parked_at FROM prev p)) AS parked_at,
       (SELECT count(*) FROM controls) AS notified
FROM target t
