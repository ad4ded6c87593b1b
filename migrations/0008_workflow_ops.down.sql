-- Revert schedules that start a workflow: their rows go (they cannot be run as
-- task schedules), then the columns.
DELETE FROM __SCHEMA__.schedules WHERE workflow IS NOT NULL;
ALTER TABLE __SCHEMA__.schedule_runs DROP COLUMN workflow_id;
ALTER TABLE __SCHEMA__.schedules
    DROP CONSTRAINT schedules_workflow_check,
    DROP COLUMN last_workflow_id,
    DROP COLUMN workflow;
