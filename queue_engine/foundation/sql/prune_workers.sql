-- Retention of the workers table (leader only): delete rows whose last sign of
-- life (heartbeat_at, which a clean stop also stamps) is older than %(cutoff)s,
-- stopped or not (a crashed process never stops its row). A row still named by
-- a running job is kept: the reaper has not recovered that job yet.
-- %(dry_run)s true: count only.
WITH doomed AS MATERIALIZED (
    SELECT w.id
    FROM __SCHEMA__.workers w
    WHERE w.heartbeat_at < %(cutoff)s::timestamptz
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.jobs j
                      WHERE j.status = 'running' AND j.claimed_by = w.id)
    ORDER BY w.heartbeat_at
    LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED
),
del AS (
    DELETE FROM __SCHEMA__.workers w
    USING doomed d
    WHERE w.id = d.id AND NOT %(dry_run)s::boolean
    RETURNING w.id
)
SELECT (SELECT count(*) FROM doomed) AS matched, (SELECT count(*) FROM del) AS deleted
