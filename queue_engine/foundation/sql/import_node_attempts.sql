-- queue-ctl import --from queue_workflows: carry the spent attempts and last
-- error of a workflow's unfinished nodes, just started by start_workflow
-- (which starts every node at attempt 0), in the transaction that started it.
-- Only waiting or queued nodes of that workflow: nothing else is touched.
UPDATE __SCHEMA__.jobs j
SET attempt = u.attempt, error = u.error,
    max_attempts = greatest(j.max_attempts, u.attempt + 1)
FROM __SCHEMA__.workflow_node_ids n
JOIN unnest(%(nodes)s::text[], %(attempts)s::int[], %(errors)s::text[]) AS u(node, attempt, error)
  ON u.node = n.node
WHERE n.workflow_id = %(workflow_id)s::bigint AND j.id = n.job_id
  AND j.status IN ('waiting', 'queued')
