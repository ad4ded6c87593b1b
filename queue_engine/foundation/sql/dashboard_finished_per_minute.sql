-- Jobs finished per queue and minute over the last hour: the overview's
-- "done/min" charts drawn at once when queue-web starts, before its own
-- samples cover the hour. A range scan of jobs_finished_at_idx, run once per
-- process (web/live.py), never per page view.
SELECT j.queue,
       extract(epoch FROM date_trunc('minute', j.finished_at))::float8 AS minute,
       count(*) AS finished
FROM __SCHEMA__.jobs_all j
WHERE j.finished_at >= date_trunc('minute', now()) - interval '1 hour'
  AND j.finished_at < date_trunc('minute', now())
GROUP BY 1, 2
ORDER BY 2, 1
