-- Start a workflow (migration 0007's start_workflow: every node, edge, gate and
-- tally in one call); returns its id and whether this call created it.
SELECT s.workflow_id, s.created
FROM __SCHEMA__.start_workflow(%(name)s, %(nodes)s::jsonb, %(idempotency_key)s,
                               %(producer)s, %(schedule)s) s
