-- How many of the given processes (any role) have registered and are past their
-- start: `queue-ctl up` says "ready" once its orchestrator, scheduler and workers
-- all are (the scheduler registers after syncing its code schedules, a worker
-- after it LISTENs).
SELECT count(*) FROM __SCHEMA__.workers
WHERE host = %(host)s AND pid = ANY(%(pids)s::int[])
  AND state NOT IN ('starting', 'stopping', 'stopped') AND stopped_at IS NULL
