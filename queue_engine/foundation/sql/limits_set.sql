-- Set a concurrency key's limit (`queue-ctl limits set KEY N`): at most
-- %(max_running)s jobs of the key run at once, cluster-wide, whatever the jobs'
-- own concurrency_limit says (migration 0031; 0 holds the key: none starts).
-- The claim reads it on its next run (concurrency_free), so no worker needs a
-- NOTIFY; jobs already running go on. previous: the limit it replaces, from
-- the statement's snapshot (NULL: none). running: the key's running jobs now.
WITH prev AS (
    SELECT c.max_running FROM __SCHEMA__.concurrency_limits c WHERE c.key = %(key)s
),
up AS (
    INSERT INTO __SCHEMA__.concurrency_limits AS c (key, max_running)
    VALUES (%(key)s, %(max_running)s)
    ON CONFLICT (key) DO UPDATE SET max_running = EXCLUDED.max_running, set_at = now()
    RETURNING c.key
)
SELECT (SELECT p.max_running FROM prev p) AS previous,
       (SELECT count(*) FROM __SCHEMA__.jobs r
        WHERE r.concurrency_key = %(key)s AND r.status = 'running') AS running,
       (SELECT count(*) FROM up) AS written
