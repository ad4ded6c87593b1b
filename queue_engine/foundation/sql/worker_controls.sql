-- What the operator controls say about one worker now: its queue's pause, scale
-- and rate limits, whether a park names it (by id, or its host for its queue or
-- for all), and whether an operator asked it to stop. The worker re-reads this
-- after every (re)connect, on a NOTIFY on "<schema>.controls" naming its queue
-- or "*", and once per heartbeat period in case a notification was missed. The
-- claim statement enforces pause, scale and park by itself (its gate CTE): this
-- read only tells the worker which state to show, whether to take a scale
-- slot, how long to wait for a rate token, and when to stop.
SELECT coalesce(q.paused, false) AS paused,
       q.scale_limit,
       q.rate_limit,
       EXISTS (SELECT 1 FROM __SCHEMA__.worker_parks p
               WHERE p.worker_id = %(worker_id)s
                  OR (p.host = %(host)s AND coalesce(p.queue, %(queue)s) = %(queue)s)) AS parked,
       coalesce((SELECT w.stop_requested_at IS NOT NULL FROM __SCHEMA__.workers w
                 WHERE w.id = %(worker_id)s), false) AS stop_requested
FROM (SELECT 1) AS one
LEFT JOIN __SCHEMA__.queues q ON q.name = %(queue)s
