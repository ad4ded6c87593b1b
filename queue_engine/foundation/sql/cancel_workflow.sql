-- Cancel a workflow (migration 0007's cancel_workflow): waiting and queued
-- nodes end now, running ones are asked to stop. No row: no such workflow.
SELECT c.canceled, c.stopping
FROM __SCHEMA__.cancel_workflow(%(id)s::bigint, %(message)s, %(cancel_channel)s) c
