-- The ids a dashboard bulk action (cancel or retry by filter) would touch:
-- the jobs matching the filters whose status the action accepts
-- (%(statuses)s), newest first, at most %(limit)s. The preview counts these
-- rows (asking for one more than the cap tells "more than the cap"), and the
-- action itself runs the client's cancel or retry on each, so one code path
-- decides what a cancel does, whatever the face.
-- %(before)s / %(floor)s: the id window the jobs page searched (see
-- dashboard_list_jobs.sql), so the preview and the action cover exactly the
-- jobs that search could show, and never scan the whole table.
-- Reads jobs alone, not jobs_all: neither action accepts a succeeded job, and
-- succeeded jobs are the only ones archived (migration 0027).
SELECT j.id
FROM __SCHEMA__.jobs j
WHERE j.status = ANY(%(statuses)s::text[])
  AND j.id < %(before)s::bigint AND j.id >= %(floor)s::bigint
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(status)s::text IS NULL OR j.status = %(status)s::text)
  AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
  AND (%(workflow)s::bigint IS NULL OR j.workflow_id = %(workflow)s::bigint)
  AND (%(args)s::jsonb IS NULL OR j.args @> %(args)s::jsonb)
  AND (%(since)s::timestamptz IS NULL OR j.created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR j.created_at < %(until)s::timestamptz)
ORDER BY j.id DESC
LIMIT %(limit)s
