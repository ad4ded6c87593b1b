-- Archiving (leader only, orchestrator/archiver.py): move one bounded batch of
-- succeeded jobs that finished more than %(after_s)s seconds before
-- %(now)s (NULL: the database clock) from jobs to jobs_archive, oldest first,
-- in one statement (migration 0027 says why).
--   * jobs_finished_at_idx drives the scan. It also passes rows that stay in
--     jobs (unsuccessful, keyed, workflow nodes), so the caller keeps a cursor:
--     (%(after_at)s, %(after_id)s) is the last (finished_at, id) the previous
--     batch scanned (NULLs: from the start), and rows before it are not walked
--     again by every batch. Ties on finished_at (a bulk cancel finishes
--     thousands of jobs at one instant) are broken by id, so the cursor always
--     moves on.
--   * A row someone holds is skipped (FOR UPDATE SKIP LOCKED); the caller's
--     periodic rescan from the start picks it up later.
--   * The move is DELETE ... RETURNING into INSERT: one statement, so every
--     snapshot sees the job in exactly one of the two tables.
-- Returns one row: jobs moved, rows scanned, and the last (finished_at, id)
-- scanned (the next batch's cursor; NULL when nothing was scanned).
WITH p AS (
    SELECT coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(after_s)s::float8)
               AS cutoff
),
scanned AS MATERIALIZED (
    SELECT j.id, j.finished_at,
           j.status = 'succeeded' AND j.workflow_id IS NULL AND j.idempotency_key IS NULL
               AS movable
    FROM __SCHEMA__.jobs j CROSS JOIN p
    WHERE j.finished_at < p.cutoff
      AND j.finished_at >= coalesce(%(after_at)s::timestamptz, '-infinity'::timestamptz)
      AND (%(after_at)s::timestamptz IS NULL
           OR (j.finished_at, j.id) > (%(after_at)s::timestamptz, %(after_id)s::bigint))
    ORDER BY j.finished_at, j.id
    LIMIT %(limit)s
),
picked AS (
    SELECT j.id
    FROM __SCHEMA__.jobs j
    JOIN scanned s ON s.id = j.id
    WHERE s.movable
      AND j.status = 'succeeded' AND j.workflow_id IS NULL AND j.idempotency_key IS NULL
    FOR UPDATE OF j SKIP LOCKED
),
moved AS (
    DELETE FROM __SCHEMA__.jobs j
    USING picked k
    WHERE j.id = k.id
    RETURNING j.*
),
ins AS (
    INSERT INTO __SCHEMA__.jobs_archive SELECT * FROM moved
    RETURNING 1
),
last AS (
    SELECT s.finished_at, s.id FROM scanned s ORDER BY s.finished_at DESC, s.id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM ins) AS moved,
       (SELECT count(*) FROM scanned) AS scanned,
       (SELECT l.finished_at FROM last l) AS last_finished_at,
       (SELECT l.id FROM last l) AS last_id
