-- queue-ctl import --from queue_workflows: ingest jobs by status, workflow
-- runs by status and DAG node-jobs by status (what a dry run reports); also
-- the check that the source is a queue_workflows database.
SELECT 'job' AS kind, j.status, count(*) AS n FROM ingest_jobs j GROUP BY j.status
UNION ALL
SELECT 'workflow', r.status, count(*) FROM workflow_runs r GROUP BY r.status
UNION ALL
SELECT 'node', n.status, count(*) FROM workflow_node_jobs n GROUP BY n.status
ORDER BY 1, 2
