-- Worker counts for the metrics scrape, by role, queue, reported state and
-- liveness (live / stopped / dead, as in stats_workers.sql).
SELECT w.role, coalesce(w.queue, '') AS queue, w.state,
       CASE
           WHEN w.flagged_dead_at IS NOT NULL THEN 'dead'
           WHEN w.stopped_at IS NOT NULL THEN 'stopped'
           WHEN w.heartbeat_at <= now() - make_interval(secs => %(dead_after_s)s::float8) THEN 'dead'
           ELSE 'live'
       END AS liveness,
       count(*) AS n
FROM __SCHEMA__.workers w
GROUP BY 1, 2, 3, 4
ORDER BY 1, 2, 3, 4
