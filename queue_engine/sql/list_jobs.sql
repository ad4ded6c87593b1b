-- Newest first; every filter is optional (NULL = any).
SELECT j.*, false AS created
FROM __SCHEMA__.jobs j
WHERE (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(status)s::text IS NULL OR j.status = %(status)s::text)
  AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
ORDER BY j.id DESC
LIMIT %(limit)s
