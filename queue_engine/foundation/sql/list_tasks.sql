-- `queue-ctl tasks` (queue_engine/producer/task_publications.py): every task whose
-- defaults a worker published (migration 0028), the defaults in effect (the
-- newest publication) and each publication still on record, newest first,
-- with its age by the database clock and its worker's liveness as `queue-ctl
-- workers` reports it (stats_workers.sql):
--   live     not stopped, not flagged, heartbeat fresher than %(dead_after_s)s
--   stopped  exited cleanly
--   dead     flagged by the orchestrator, or not stopped with a stale heartbeat
-- A publication goes with its worker's row, which the orchestrator prunes.
-- %(task)s: only that task (NULL: all).
SELECT d.task, d.queue, d.priority, d.max_attempts, d.timeout_s, d.lease_ttl_s,
       d.stall_timeout_s, d.retry, d.worker_id, d.host, d.pid, d.app, d.published_at,
       extract(epoch FROM now() - d.published_at)::float8 AS age_s,
       coalesce(
           jsonb_agg(
               jsonb_build_object(
                   'worker_id', p.worker_id, 'host', p.host, 'pid', p.pid, 'app', p.app,
                   'published_at', p.published_at,
                   'age_s', extract(epoch FROM now() - p.published_at)::float8,
                   'queue', p.queue, 'priority', p.priority,
                   'max_attempts', p.max_attempts, 'timeout_s', p.timeout_s,
                   'lease_ttl_s', p.lease_ttl_s, 'stall_timeout_s', p.stall_timeout_s,
                   'retry', p.retry,
                   'liveness', CASE
                       WHEN w.flagged_dead_at IS NOT NULL THEN 'dead'
                       WHEN w.stopped_at IS NOT NULL THEN 'stopped'
                       WHEN w.heartbeat_at <= now() - make_interval(secs => %(dead_after_s)s::float8)
                           THEN 'dead'
                       ELSE 'live'
                   END
               ) ORDER BY p.published_at DESC, p.worker_id
           ) FILTER (WHERE p.worker_id IS NOT NULL),
           '[]'::jsonb
       ) AS publications
FROM __SCHEMA__.task_defaults d
LEFT JOIN __SCHEMA__.task_publications p ON p.task = d.task
LEFT JOIN __SCHEMA__.workers w ON w.id = p.worker_id
WHERE d.task = %(task)s::text OR %(task)s::text IS NULL
GROUP BY d.task
ORDER BY d.task
