-- Refresh the planner's statistics of one engine table ({table}: its name, a
-- quoted identifier composed by queue_engine/statistics.py).
-- ANALYZE samples at most 300 x default_statistics_target rows (30,000 by
-- default), so its cost is bounded however large the table is; it takes a
-- SHARE UPDATE EXCLUSIVE lock, which blocks no read or write of the rows.
ANALYZE __SCHEMA__.{table}
