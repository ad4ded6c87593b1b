-- Revert workflows: drop their functions, trigger and tables, the node columns
-- and the two new statuses (only possible while no job uses them).
DROP TRIGGER jobs_workflow_moved ON __SCHEMA__.jobs;
DROP FUNCTION __SCHEMA__.jobs_workflow_moved();
DROP FUNCTION __SCHEMA__.stuck_workflow_nodes();
DROP FUNCTION __SCHEMA__.retry_workflow(bigint, text, text);
DROP FUNCTION __SCHEMA__.cancel_workflow(bigint, text, text);
DROP FUNCTION __SCHEMA__.provide_input(bigint, text, jsonb);
DROP FUNCTION __SCHEMA__.start_workflow(text, jsonb, text, text, text);
DROP FUNCTION __SCHEMA__.workflow_release(bigint, text, text, text, boolean);
DROP FUNCTION __SCHEMA__.workflow_tally(bigint, bigint, text, text);
DROP FUNCTION __SCHEMA__.workflow_final(text);
DROP TABLE __SCHEMA__.job_gates;
DROP TABLE __SCHEMA__.job_deps;
DROP TABLE __SCHEMA__.workflow_tallies;
DROP TABLE __SCHEMA__.workflows;
DROP INDEX __SCHEMA__.jobs_waiting_input_idx;
DROP INDEX __SCHEMA__.jobs_workflow_node_uidx;
ALTER TABLE __SCHEMA__.jobs
    DROP CONSTRAINT jobs_node_check,
    DROP CONSTRAINT jobs_workflow_node_check,
    DROP COLUMN pending_parents,
    DROP COLUMN node,
    DROP COLUMN workflow_id;
DELETE FROM __SCHEMA__.job_transitions
WHERE from_status IN ('waiting', 'skipped') OR to_status IN ('waiting', 'skipped');
ALTER TABLE __SCHEMA__.jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE __SCHEMA__.jobs ADD CONSTRAINT jobs_status_check CHECK
    (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled', 'lost'));
