-- The testing kit's view of enqueued work (queue_engine.testing.enqueued_jobs), oldest first.
-- Every filter is optional (NULL = any). %(args)s is a subset match: the job's args
-- contain it (jsonb @>), so a test names only the arguments it cares about.
SELECT j.*, false AS created
FROM __SCHEMA__.jobs_all j
WHERE (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(status)s::text IS NULL OR j.status = %(status)s::text)
  AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
  AND (%(args)s::jsonb IS NULL OR j.args @> %(args)s::jsonb)
ORDER BY j.id
LIMIT %(limit)s
