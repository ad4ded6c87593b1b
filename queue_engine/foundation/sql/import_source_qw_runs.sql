-- queue-ctl import --from queue_workflows: the next batch of unfinished
-- workflow runs (queued or running), in id order after %(after)s, each with
-- its node-jobs as one JSON array (node order: id). A plain SELECT on a
-- read-only session, as the other source reads.
SELECT r.id AS key, r.id::text AS old_id, r.workflow_name, r.status, r.created_at,
       coalesce((
           SELECT jsonb_agg(jsonb_build_object(
                      'id', n.id, 'node', n.node_name, 'task', n.node_module,
                      'queue', n.queue, 'depends_on', to_jsonb(n.depends_on),
                      'inputs', n.inputs, 'status', n.status, 'attempts', n.attempts,
                      'max_attempts', n.max_attempts, 'result', n.context_delta,
                      'required_model', n.required_model,
                      'error', n.error) ORDER BY n.id)
           FROM workflow_node_jobs n WHERE n.run_id = r.id
       ), '[]'::jsonb) AS nodes
FROM workflow_runs r
WHERE r.status IN ('queued', 'running') AND r.id > %(after)s::bigint
ORDER BY r.id
LIMIT %(limit)s
