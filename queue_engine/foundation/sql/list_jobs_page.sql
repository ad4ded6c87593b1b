-- One page of jobs, newest first, for the HTTP API and the dashboard.
-- Keyset pagination: %(after_id)s is the last id of the previous page (NULL: the
-- first page), so a page is `id < after_id ORDER BY id DESC LIMIT n`, which walks
-- the primary key backwards and stops after n matches: no OFFSET, no count, and
-- jobs inserted meanwhile (larger ids) never shift a later page.
-- Every filter is optional (NULL = any):
--   %(statuses)s   text[] of statuses
--   %(queue)s, %(task)s
--   %(args)s       jsonb the job's args must contain (@>)
--   %(created_after)s, %(created_before)s   timestamptz bounds of created_at
SELECT j.*, false AS created
FROM __SCHEMA__.jobs_all j
WHERE (%(after_id)s::bigint IS NULL OR j.id < %(after_id)s::bigint)
  AND (%(statuses)s::text[] IS NULL OR j.status = ANY (%(statuses)s::text[]))
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
  AND (%(args)s::jsonb IS NULL OR j.args @> %(args)s::jsonb)
  AND (%(created_after)s::timestamptz IS NULL OR j.created_at >= %(created_after)s::timestamptz)
  AND (%(created_before)s::timestamptz IS NULL OR j.created_at < %(created_before)s::timestamptz)
ORDER BY j.id DESC
LIMIT %(limit)s
