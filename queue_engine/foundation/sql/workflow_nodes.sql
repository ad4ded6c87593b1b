-- Every node of one workflow with its edges (for `queue-ctl workflows show`),
-- in start order (parents first), through workflow_node_ids (migration 0021).
--
-- The parents' names come from one map of the workflow's node ids to names
-- (built once), not from a join to jobs per node: with the statistics of a
-- table that just grew by a 10,000-node workflow (before any ANALYZE), the
-- planner joined each node's edges to a scan of every job, which made this
-- read quadratic (20 s for 10,000 nodes). Now each node costs one probe of
-- job_deps_child_idx and a lookup in the map, whatever the statistics say.
-- The nodes themselves are read by id (id = ANY of the workflow's ids, one
-- read of workflow_node_ids for both), never by a join with jobs, for the
-- same reason.
WITH names AS (
    SELECT coalesce(jsonb_object_agg(n.job_id::text, n.node), '{}'::jsonb) AS by_id,
           coalesce(array_agg(n.job_id), '{}') AS ids
    FROM __SCHEMA__.workflow_node_ids n
    WHERE n.workflow_id = %(id)s
)
SELECT j.id, j.node, j.task, j.queue, j.status, j.attempt, j.max_attempts, j.pending_parents,
       j.started_at, j.finished_at, j.duration_ms, j.error, j.result,
       (SELECT jsonb_agg(jsonb_build_object('node', names.by_id ->> d.parent_id::text,
                                            'requires', d.requires)
                         ORDER BY d.parent_id)
        FROM __SCHEMA__.job_deps d
        WHERE d.child_id = j.id) AS after
FROM __SCHEMA__.jobs j CROSS JOIN names
WHERE j.id = ANY ((SELECT x.ids FROM names x)::bigint[])
ORDER BY j.id
