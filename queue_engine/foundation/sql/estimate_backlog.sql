-- A queue's backlog (queued and delayed jobs), as the planner estimates it:
-- stats.py runs this under EXPLAIN, never for its rows, and reads the plan's
-- row estimate. Used only when the exact count of stats_queues.sql stopped at
-- its cap (QUEUE_ENGINE_STATS_EXACT_CAP). The estimate is as fresh as the
-- table's statistics (the last ANALYZE), and follows the relation's current
-- size; the extended statistics jobs_queue_status_stats (migration stats_estimates) give
-- the planner the share of each (queue, status) pair, without which it would
-- multiply the share of the queue in the whole table (mostly history) by the
-- share of queued rows.
SELECT 1
FROM __SCHEMA__.jobs j
WHERE j.status = 'queued' AND j.queue = %(queue)s::text
