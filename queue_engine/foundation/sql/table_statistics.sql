-- The engine's tables with how much changed since the planner last looked:
-- n_mod_since_analyze (rows inserted, updated or deleted since the last
-- ANALYZE, manual or automatic), the planner's row estimate (reltuples, -1
-- when the table was never vacuumed nor analyzed), the last analyze times and
-- the dead row versions VACUUM has not removed yet (n_dead_tup: the
-- vacuumer's trigger, orchestrator/vacuumer.py) and how many manual VACUUMs
-- completed (vacuum_count: whether the vacuumer's ran or skipped the table).
-- Reads the cumulative statistics views only: no table is touched.
SELECT s.relname AS name,
       s.n_mod_since_analyze AS changes,
       c.reltuples::float8 AS estimated_rows,
       greatest(s.last_analyze, s.last_autoanalyze) AS analyzed_at,
       s.n_dead_tup AS dead_rows,
       s.vacuum_count AS vacuum_count
FROM pg_catalog.pg_stat_user_tables s
JOIN pg_catalog.pg_class c ON c.oid = s.relid
WHERE s.schemaname = %(schema)s
  AND (%(tables)s::text[] IS NULL OR s.relname = ANY (%(tables)s::text[]))
ORDER BY s.relname
