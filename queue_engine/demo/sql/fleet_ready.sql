-- How many of the given worker processes have registered and are idle: a
-- registered worker is already LISTENing on its queue's channel.
SELECT count(*) FROM __SCHEMA__.workers
WHERE role = 'worker' AND host = %(host)s AND pid = ANY(%(pids)s::int[])
  AND state = 'idle' AND stopped_at IS NULL
