-- Every park, for `queue-ctl controls`, oldest first: its target (a host, for
-- all queues or one; or one worker process, with that worker's host and queue)
-- and how many live workers (role worker, not stopped, not flagged dead) it
-- matches now. A host park with 0 matches still holds for workers started later.
SELECT p.id,
       CASE WHEN p.worker_id IS NULL THEN 'host' ELSE 'worker' END AS kind,
       coalesce(p.host, w.host) AS host,
       coalesce(p.queue, w.queue) AS queue,
       p.worker_id,
       p.parked_at,
       (SELECT count(*) FROM __SCHEMA__.workers m
        WHERE m.role = 'worker' AND m.stopped_at IS NULL AND m.flagged_dead_at IS NULL
          AND CASE WHEN p.worker_id IS NOT NULL THEN m.id = p.worker_id
                   ELSE m.host = p.host AND (p.queue IS NULL OR m.queue = p.queue) END)
           AS live_workers
FROM __SCHEMA__.worker_parks p
LEFT JOIN __SCHEMA__.workers w ON w.id = p.worker_id
ORDER BY p.parked_at, p.id
