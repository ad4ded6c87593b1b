-- Every row of the workers table for `queue-ctl workers` and the live view, with
-- the heartbeat age measured by the database clock and a liveness verdict:
--   live     not stopped, not flagged, heartbeat fresher than %(dead_after_s)s
--   stopped  exited cleanly (stopped_at set)
--   dead     flagged by the orchestrator, or not stopped with a stale heartbeat
-- state 'parked': alive, heartbeating, claiming nothing (a park, or no scale slot).
-- stop_requested_at: `queue-ctl stop` asked it to exit after its current job;
-- stop_now: `stop --now` (migration 0030) asked it to give its running job back.
-- warm_key: the affinity key it is warm for (it prefers jobs that name it).
-- %(now)s pins the clock for tests; NULL: the database's now().
SELECT w.id, w.role, w.host, w.pid, w.queue, w.state, w.current_job_id,
       w.started_at, w.heartbeat_at, w.stopped_at, w.flagged_dead_at,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - w.heartbeat_at)::float8
           AS heartbeat_age_s,
       w.rss_bytes, w.cpu_percent,
       CASE
           WHEN w.flagged_dead_at IS NOT NULL THEN 'dead'
           WHEN w.stopped_at IS NOT NULL THEN 'stopped'
           WHEN w.heartbeat_at <= coalesce(%(now)s::timestamptz, now())
                                  - make_interval(secs => %(dead_after_s)s::float8) THEN 'dead'
           ELSE 'live'
       END AS liveness,
       -- Host telemetry of the last heartbeat (workers: {"load": [1m, 5m, 15m], "gpu": ...}).
       w.telemetry,
       w.warm_key, w.stop_requested_at, w.stop_now
FROM __SCHEMA__.workers w
ORDER BY w.role, w.queue NULLS FIRST, w.host, w.id
