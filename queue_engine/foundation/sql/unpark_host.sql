-- Remove host parks (`queue-ctl unpark --host H [--queue Q]`): without a queue,
-- every park of the host (all-queue and per-queue); with one, only the park of
-- that queue. NOTIFYs '*' on the controls channel in the same transaction.
-- Also reports what still keeps workers of the host from claiming, read from
-- the statement's snapshot (the DELETE never removes those rows): the
-- all-queue park of the host when only one queue was unparked, and parks of
-- single live workers on the host (`unpark --worker ID` removes those).
WITH gone AS (
    DELETE FROM __SCHEMA__.worker_parks p
    WHERE p.worker_id IS NULL AND p.host = %(host)s
      AND (%(queue)s::text IS NULL OR p.queue = %(queue)s::text)
    RETURNING p.queue
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, '*')
)
SELECT (SELECT count(*) FROM gone) AS removed,
       coalesce((SELECT array_agg(g.queue ORDER BY g.queue NULLS FIRST) FROM gone g),
                '{}'::text[]) AS removed_queues,
       (SELECT a.parked_at FROM __SCHEMA__.worker_parks a
        WHERE %(queue)s::text IS NOT NULL
          AND a.worker_id IS NULL AND a.host = %(host)s AND a.queue IS NULL) AS host_parked_at,
       coalesce((SELECT array_agg(w.id ORDER BY w.id)
                 FROM __SCHEMA__.worker_parks p
                 JOIN __SCHEMA__.workers w ON w.id = p.worker_id
                 WHERE w.host = %(host)s
                   AND (%(queue)s::text IS NULL OR w.queue = %(queue)s::text)
                   AND w.role = 'worker' AND w.stopped_at IS NULL
                   AND w.flagged_dead_at IS NULL), '{}'::text[]) AS parked_worker_ids,
       (SELECT count(*) FROM controls) AS notified
