-- Newest first; every filter is optional (NULL = any).
-- %(older_than_s)s: only jobs created more than that many seconds ago (database clock).
SELECT j.*, false AS created
FROM __SCHEMA__.jobs_all j
WHERE (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(status)s::text IS NULL OR j.status = %(status)s::text)
  AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
  AND (%(older_than_s)s::float8 IS NULL
       OR j.created_at < now() - make_interval(secs => %(older_than_s)s::float8))
ORDER BY j.id DESC
LIMIT %(limit)s
