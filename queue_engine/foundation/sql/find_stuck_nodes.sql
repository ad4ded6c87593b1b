-- The "no stuck node" check (leader only, orchestrator/stuck_nodes.py): migration
-- 0007's stuck_workflow_nodes(), at most %(limit)s rows for the log line, each
-- with the total count. A waiting node whose parents have all ended should have
-- been queued, canceled or skipped by the statement that ended the last of them:
-- every row here is an engine bug to report, never a condition this check repairs.
SELECT s.job_id, s.workflow_id, s.node, s.pending_parents, count(*) OVER () AS total
FROM __SCHEMA__.stuck_workflow_nodes() s
ORDER BY s.workflow_id, s.job_id
LIMIT %(limit)s
