-- queue-ctl import --dry-run: the rows of one batch that the import would map
-- to a job of this engine by their key instead of inserting them, as
-- import_jobs.sql does (an idempotency key held by any job; a dedupe key held
-- by a queued or running one). Reads only, so the dry run's counts say what
-- the real run will do.
SELECT t.old_id
FROM unnest(%(old_id)s::text[], %(idempotency_key)s::text[], %(dedupe_key)s::text[])
     AS t(old_id, idempotency_key, dedupe_key)
WHERE EXISTS (
    SELECT 1 FROM __SCHEMA__.jobs j
    WHERE (t.idempotency_key IS NOT NULL AND j.idempotency_key = t.idempotency_key)
       OR (t.dedupe_key IS NOT NULL AND j.dedupe_key = t.dedupe_key
           AND j.status IN ('queued', 'running'))
)
