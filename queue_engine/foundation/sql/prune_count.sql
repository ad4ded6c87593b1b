-- Dry run of retention (`queue-ctl prune --dry-run`): how many finished jobs of
-- the given statuses finished before %(cutoff)s, and how many events they have.
-- Workflow nodes are left out: they go with their workflow (prune_workflows_count.sql).
SELECT j.status, count(*) AS jobs,
       coalesce(sum((SELECT count(*) FROM __SCHEMA__.job_events e WHERE e.job_id = j.id)), 0)
           AS events
FROM __SCHEMA__.jobs_all j
WHERE j.finished_at < %(cutoff)s::timestamptz
  AND j.status = ANY (%(statuses)s::text[])
  AND j.workflow_id IS NULL
GROUP BY j.status
