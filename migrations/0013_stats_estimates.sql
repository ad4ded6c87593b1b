-- Issue 15: `queue-ctl stats` at 10 million jobs. Above a cap
-- (QUEUE_ENGINE_STATS_EXACT_CAP), a queue's backlog is estimated from the
-- planner's statistics (sql/estimate_backlog.sql). Without these extended
-- statistics the planner treats queue and status as independent and estimates
-- a backlog as (share of the queue in the table) x (share of queued rows): on a
-- table that is mostly history that is off by orders of magnitude. The MCV
-- list on (queue, status) records the share of each pair (up to the statistics
-- target, 100 pairs by default), filled by the next ANALYZE (the migrator runs
-- one after a schema change; autovacuum's analyze keeps it fresh).
-- Creating it takes a SHARE UPDATE EXCLUSIVE lock on jobs for an instant (no
-- table scan): safe on a big, busy table. The ANALYZE that fills it samples
-- 30,000 rows (default statistics target), whatever the table's size.
CREATE STATISTICS __SCHEMA__.jobs_queue_status_stats (mcv) ON queue, status
    FROM __SCHEMA__.jobs;
