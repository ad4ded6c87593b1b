-- Park the workers of a host (`queue-ctl park --host H [--queue Q]`): for one
-- queue, or (%(queue)s NULL) for all of them. A park is a worker_parks row read
-- by the claim, so it also holds for workers started on the host later, until
-- `queue-ctl unpark`. Parking twice keeps the first row and its parked_at.
-- NOTIFYs '*' on the controls channel in the same transaction: a park may touch
-- several queues, so every worker re-reads its controls.
-- Returns whether the row was created, since when the park holds, whether an
-- all-queue park of the host already covers the queue, and the live workers
-- (role worker, not stopped, not flagged dead) it matches now.
WITH ins AS (
    INSERT INTO __SCHEMA__.worker_parks (host, queue)
    VALUES (%(host)s, %(queue)s::text)
    ON CONFLICT (host, coalesce(queue, '')) WHERE worker_id IS NULL DO NOTHING
    RETURNING parked_at
),
prev AS (
    SELECT p.parked_at FROM __SCHEMA__.worker_parks p
    WHERE p.worker_id IS NULL AND p.host = %(host)s
      AND p.queue IS NOT DISTINCT FROM %(queue)s::text
),
matching AS (
    SELECT w.id FROM __SCHEMA__.workers w
    WHERE w.role = 'worker' AND w.stopped_at IS NULL AND w.flagged_dead_at IS NULL
      AND w.host = %(host)s
      AND (%(queue)s::text IS NULL OR w.queue = %(queue)s::text)
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, '*')
)
SELECT EXISTS (SELECT 1 FROM ins) AS created,
       coalesce((SELECT i.parked_at FROM ins i), (SELECT p.parked_at FROM prev p)) AS parked_at,
       (%(queue)s::text IS NOT NULL AND EXISTS (
            SELECT 1 FROM __SCHEMA__.worker_parks a
            WHERE a.worker_id IS NULL AND a.host = %(host)s AND a.queue IS NULL))
           AS covered_by_host_park,
       coalesce((SELECT array_agg(m.id ORDER BY m.id) FROM matching m), '{}'::text[])
           AS worker_ids,
       (SELECT count(*) FROM controls) AS notified
