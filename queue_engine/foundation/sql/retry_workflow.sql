-- Re-run a workflow's failed, canceled and lost nodes and their descendants
-- that did not succeed (migration 0007's retry_workflow). NULL: no such workflow.
SELECT __SCHEMA__.retry_workflow(%(id)s::bigint, %(message)s, %(jobs_channel)s) AS rerun
