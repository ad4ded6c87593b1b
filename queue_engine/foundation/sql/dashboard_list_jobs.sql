-- One page of the dashboard's jobs list: newest first, every filter optional (NULL = any).
-- Keyset pagination: %(before)s is the smallest id of the page shown before
-- (NULL: start at the newest), so a page costs the same at any depth and rows
-- inserted meanwhile never shift it (no OFFSET).
-- %(args)s: JSON containment (`args @> '{"user": 42}'`).
-- %(since)s / %(until)s: created_at range, [since, until).
-- %(floor)s: with a filter, only ids >= floor are searched (a window of the
-- newest ids below %(before)s): the scan walks the primary key backwards and
-- stops at %(limit)s rows or at the floor, so a filter matching few or no rows
-- never reads the whole table (bench/web_pages.py). The page offers to search
-- the next window. NULL: no floor (no filter: every row matches anyway).
-- %(workflow)s: the nodes of one workflow (a folded fan-out's link on the
-- workflow page adds its task and a window that starts at its last node).
-- The progress document is read for running jobs only (the list draws their
-- bar), and of a failed or lost job's error only its end, where a traceback
-- says what was raised (the list shows that line); the workflow columns let
-- the page show an input node as one.
SELECT j.id, j.queue, j.task, j.status, j.priority, j.attempt, j.max_attempts, j.args,
       j.created_at, j.available_at, j.started_at, j.finished_at, j.duration_ms,
       j.workflow_id, j.node, j.pending_parents,
       CASE WHEN j.status = 'running' THEN j.progress END AS progress,
       CASE WHEN j.status IN ('failed', 'lost') THEN right(j.error, 600) END AS error_tail
FROM __SCHEMA__.jobs_all j
WHERE (%(before)s::bigint IS NULL OR j.id < %(before)s::bigint)
  AND (%(floor)s::bigint IS NULL OR j.id >= %(floor)s::bigint)
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(status)s::text IS NULL OR j.status = %(status)s::text)
  AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
  AND (%(workflow)s::bigint IS NULL OR j.workflow_id = %(workflow)s::bigint)
  AND (%(args)s::jsonb IS NULL OR j.args @> %(args)s::jsonb)
  AND (%(since)s::timestamptz IS NULL OR j.created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR j.created_at < %(until)s::timestamptz)
ORDER BY j.id DESC
LIMIT %(limit)s
