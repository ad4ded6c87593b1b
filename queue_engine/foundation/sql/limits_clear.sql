-- Clear a concurrency key's limit (`queue-ctl limits clear KEY`): its jobs
-- fall back to their own concurrency_limit (none: unlimited). Returns the
-- limit it removed; no row when the key had none.
DELETE FROM __SCHEMA__.concurrency_limits c
WHERE c.key = %(key)s
RETURNING c.max_running
