-- Retention of the audit of controls (leader only, migration 0034): delete at
-- most %(limit)s rows older than %(cutoff)s, oldest first through
-- control_events_at_idx. %(dry_run)s true: count only.
WITH doomed AS MATERIALIZED (
    SELECT e.id
    FROM __SCHEMA__.control_events e
    WHERE e.at < %(cutoff)s::timestamptz
    ORDER BY e.at
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED
),
del AS (
    DELETE FROM __SCHEMA__.control_events e
    USING doomed d
    WHERE e.id = d.id AND NOT %(dry_run)s::boolean
    RETURNING e.id
)
SELECT (SELECT count(*) FROM doomed) AS matched, (SELECT count(*) FROM del) AS deleted
