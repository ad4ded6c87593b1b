-- Retention of archived jobs (leader only, orchestrator/pruner.py): delete one
-- bounded batch of jobs_archive rows of the given statuses that finished before
-- %(cutoff)s, and their job_events, in one statement. The same shape as
-- prune_jobs.sql (its comments hold here); the archive holds only succeeded
-- jobs outside workflows (migration 0027), so there is nothing to skip but
-- rows someone holds.
WITH doomed AS MATERIALIZED (
    SELECT a.id, a.finished_at
    FROM __SCHEMA__.jobs_archive a
    WHERE a.finished_at < %(cutoff)s::timestamptz
      AND a.finished_at >= coalesce(%(after)s::timestamptz, '-infinity'::timestamptz)
      AND a.status = ANY (%(statuses)s::text[])
    ORDER BY a.finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
del AS (
    DELETE FROM __SCHEMA__.jobs_archive a
    USING doomed d
    WHERE a.id = d.id
    RETURNING a.id, a.status
),
ev AS (
    DELETE FROM __SCHEMA__.job_events e
    WHERE e.job_id = ANY (ARRAY(SELECT d.id FROM del d))
    RETURNING e.id
)
SELECT coalesce((SELECT jsonb_object_agg(c.status, c.n)
                 FROM (SELECT d.status, count(*) AS n FROM del d GROUP BY d.status) c),
                '{}'::jsonb) AS jobs_by_status,
       (SELECT count(*) FROM ev) AS events,
       (SELECT count(*) FROM doomed) AS scanned,
       (SELECT max(d.finished_at) FROM doomed d) AS last_finished_at
