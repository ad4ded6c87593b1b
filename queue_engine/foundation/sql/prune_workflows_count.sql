-- Dry run of workflow retention (`queue-ctl prune --dry-run`): per final state
-- in %(states)s, how many workflows finished before %(cutoff)s, how many jobs
-- (nodes) they hold and how many events those jobs have.
SELECT w.state, count(*) AS workflows, coalesce(sum(w.node_count), 0) AS jobs,
       coalesce(sum((SELECT count(*) FROM __SCHEMA__.workflow_node_ids n
                     JOIN __SCHEMA__.job_events e ON e.job_id = n.job_id
                     WHERE n.workflow_id = w.id)), 0) AS events
FROM __SCHEMA__.workflows w
WHERE w.finished_at < %(cutoff)s::timestamptz
  AND w.state = ANY (%(states)s::text[])
GROUP BY w.state
