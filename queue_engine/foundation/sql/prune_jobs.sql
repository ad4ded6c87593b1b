-- Retention (leader only): delete one bounded batch of finished jobs of the given
-- statuses that finished before %(cutoff)s, and their job_events, in one statement.
-- {table} (a quoted identifier composed by orchestrator/pruner.py) is jobs, or
-- jobs_archive: the succeeded jobs the archiver moved (migration 0027), pruned
-- by the same statement.
--   * the table's finished_at index drives the scan, oldest first; %(after)s (NULL at the
--     start of a run) is the newest finished_at of the previous batch, so rows
--     this statement skips (other statuses, locked rows) are not walked again
--     by every batch of the run.
--   * FOR UPDATE SKIP LOCKED: a row someone else holds (an operator's retry) is
--     left for a later run instead of waited on; the status check in the DELETE
--     makes a concurrent `retry` win either way.
--   * The events go in the same statement, through job_events_job_id_idx, so a
--     job and its timeline disappear together.
--   * Workflow nodes are never deleted here (workflow_id IS NULL): a node of a
--     running workflow is still read by its children (results, edges), and a
--     finished workflow goes as a whole (prune_workflows.sql).
-- Returns one row: jobs deleted by status, events deleted, rows scanned, and the
-- newest finished_at scanned (the next batch's %(after)s).
WITH doomed AS MATERIALIZED (
    SELECT j.id, j.finished_at
    FROM __SCHEMA__.{table} j
    WHERE j.finished_at < %(cutoff)s::timestamptz
      AND j.finished_at >= coalesce(%(after)s::timestamptz, '-infinity'::timestamptz)
      AND j.status = ANY (%(statuses)s::text[])
      AND j.workflow_id IS NULL
    ORDER BY j.finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
del AS (
    DELETE FROM __SCHEMA__.{table} j
    USING doomed d
    WHERE j.id = d.id AND j.status = ANY (%(statuses)s::text[])
    RETURNING j.id, j.status
),
ev AS (
    DELETE FROM __SCHEMA__.job_events e
    WHERE e.job_id = ANY (ARRAY(SELECT d.id FROM del d))
    RETURNING e.id
)
SELECT coalesce((SELECT jsonb_object_agg(c.status, c.n)
                 FROM (SELECT d.status, count(*) AS n FROM del d GROUP BY d.status) c),
                jsonb_build_object()) AS jobs_by_status,
       (SELECT count(*) FROM ev) AS events,
       (SELECT count(*) FROM doomed) AS scanned,
       (SELECT max(d.finished_at) FROM doomed d) AS last_finished_at
