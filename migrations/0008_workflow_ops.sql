-- queue-engine: schedules that start a workflow (queue-scheduler). __SCHEMA__ is
-- replaced by the quoted engine schema name. Guide: docs/guides/workflows.md,
-- "Scheduled workflows".
--
-- A schedule declared in code with @periodic(..., workflow=factory) names its
-- factory in `workflow` ('module:qualname'); only a scheduler that imported that
-- app can build the workflow, so only code schedules may carry one (the CHECK).
-- The slot's workflow is started in the transaction that inserts the slot's
-- schedule_runs row, exactly as a task schedule's job: schedule_runs.workflow_id
-- records it, schedules.last_workflow_id is the latest (for overlap = 'skip').
-- Nullable columns without defaults: adding them rewrites nothing.
ALTER TABLE __SCHEMA__.schedules
    ADD COLUMN workflow text,
    ADD COLUMN last_workflow_id bigint,
    ADD CONSTRAINT schedules_workflow_check CHECK
        (workflow IS NULL OR (source = 'code' AND char_length(workflow) BETWEEN 1 AND 255));
ALTER TABLE __SCHEMA__.schedule_runs
    ADD COLUMN workflow_id bigint;
