-- Every node of one workflow with its edges (for `queue-ctl workflows show`),
-- in start order (parents first), through jobs_workflow_node_uidx.
SELECT j.id, j.node, j.task, j.queue, j.status, j.attempt, j.max_attempts, j.pending_parents,
       j.started_at, j.finished_at, j.duration_ms, j.error, j.result,
       (SELECT jsonb_agg(jsonb_build_object('node', p.node, 'requires', d.requires)
                         ORDER BY p.id)
        FROM __SCHEMA__.job_deps d JOIN __SCHEMA__.jobs p ON p.id = d.parent_id
        WHERE d.child_id = j.id) AS after
FROM __SCHEMA__.jobs j
WHERE j.workflow_id = %(id)s
ORDER BY j.id
