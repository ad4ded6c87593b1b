-- Run-time distribution for the metrics scrape: jobs that succeeded or failed in
-- the last %(window_s)s seconds, per queue and bucket. ``bucket`` is the index of
-- the first bound of %(bounds_s)s that is >= the run time (the number of bounds
-- below it; len(bounds) means above every bound); the caller makes the counts
-- cumulative, as a Prometheus histogram's buckets. Reads the
-- jobs_finished_at_idx range of the window only, newest first, and at most
-- %(cap)s rows of it (QUEUE_ENGINE_STATS_EXACT_CAP): at 2,000 jobs/s the window
-- holds 1.8 million jobs, so a busy window's histogram is that of its newest
-- %(cap)s jobs (a sample), and the scrape costs the same at any rate.
SELECT r.queue, r.bucket, count(*) AS n, sum(r.run_s)::float8 AS total_s
FROM (
    SELECT j.queue, j.duration_ms / 1000.0 AS run_s,
           (SELECT count(*) FROM unnest(%(bounds_s)s::float8[]) AS b(le)
            WHERE b.le < j.duration_ms / 1000.0) AS bucket
    FROM __SCHEMA__.jobs_all j
    WHERE j.finished_at > now() - make_interval(secs => %(window_s)s::float8)
      AND j.status IN ('succeeded', 'failed')
      AND j.duration_ms IS NOT NULL
    ORDER BY j.finished_at DESC
    LIMIT %(cap)s
) r
GROUP BY r.queue, r.bucket
ORDER BY r.queue, r.bucket
