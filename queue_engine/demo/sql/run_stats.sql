-- Progress and timings of one run of jobs (`queue-ctl bench`): how many of the
-- run's jobs finished, the drain window (first start to last finish), and the
-- wake latency percentiles (started_at - created_at, in ms; unstarted jobs,
-- whose started_at is NULL, are ignored by percentile_cont).
SELECT count(*) AS total,
       count(*) FILTER (WHERE status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')) AS finished,
       count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       min(started_at) AS first_started,
       max(finished_at) AS last_finished,
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (
           ORDER BY (extract(epoch FROM started_at - created_at) * 1000)::float8
       ) AS latency_ms
FROM __SCHEMA__.jobs_all
WHERE queue = %(queue)s AND id BETWEEN %(first_id)s AND %(last_id)s
