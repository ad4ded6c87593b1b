-- Least-privilege group roles for queue-engine (docs/operations.md, "Roles").
-- Print it with `queue-ctl roles` and run it as the owner of the engine schema
-- (the role that runs `queue-ctl migrate` and the orchestrator), after migrating.
-- It is idempotent: roles are created only when missing, grants can be repeated.
-- The roles are NOLOGIN groups: give each application its own login role and
-- make it a member, e.g.  CREATE ROLE etl_worker LOGIN PASSWORD '...' IN ROLE __WORKER_ROLE__;
--
--   __WORKER_ROLE__    a queue-claim-worker: claim, heartbeat, finish (no DDL, no DELETE)
--   __PRODUCER_ROLE__  application code: enqueue and read job status (no UPDATE, no DELETE)
--   __MONITOR_ROLE__   dashboards, `queue-ctl stats/workers/show/top`: read only
--
-- Cancel and retry are UPDATEs: they are operator actions (the owner role). An
-- application that must cancel its own jobs needs, on top of the producer role:
--   GRANT UPDATE ON __SCHEMA__.jobs TO <its role>; GRANT SELECT ON __SCHEMA__.job_transitions TO <its role>;
--   GRANT INSERT ON __SCHEMA__.job_events TO <its role>;
-- A handler that enqueues follow-up jobs on the worker's own connection needs
--   GRANT __PRODUCER_ROLE__ TO __WORKER_ROLE__;
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '__WORKER_ROLE__') THEN
        CREATE ROLE __WORKER_ROLE__ NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '__PRODUCER_ROLE__') THEN
        CREATE ROLE __PRODUCER_ROLE__ NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '__MONITOR_ROLE__') THEN
        CREATE ROLE __MONITOR_ROLE__ NOLOGIN;
    END IF;
END
$roles$;

-- Every role may look up names in the schema (but not CREATE in it).
GRANT USAGE ON SCHEMA __SCHEMA__ TO __WORKER_ROLE__, __PRODUCER_ROLE__, __MONITOR_ROLE__;
-- Which schema version is installed (workers and clients may wait for theirs).
GRANT SELECT ON __SCHEMA__.schema_migrations TO __WORKER_ROLE__, __PRODUCER_ROLE__, __MONITOR_ROLE__;

-- Worker: claim and finish jobs (UPDATE ... RETURNING needs SELECT), write their
-- events, register and heartbeat its own row. The transition guard trigger runs
-- as the updating role and reads job_transitions.
GRANT SELECT, UPDATE ON __SCHEMA__.jobs TO __WORKER_ROLE__;
GRANT SELECT ON __SCHEMA__.job_transitions TO __WORKER_ROLE__;
GRANT INSERT ON __SCHEMA__.job_events TO __WORKER_ROLE__;
-- UPDATE covers the columns a worker writes on its own row (state, including
-- 'parked'; warm_key; and reading stop_requested_at back).
GRANT SELECT, INSERT, UPDATE ON __SCHEMA__.workers TO __WORKER_ROLE__;
-- A worker publishes its tasks' defaults when it starts (migration 0028; an
-- upsert, which reads the row it replaces).
GRANT SELECT, INSERT, UPDATE ON __SCHEMA__.task_defaults, __SCHEMA__.task_publications
    TO __WORKER_ROLE__;
-- The claim reads the queue controls (paused, scale_limit, rate_limit) and the
-- parks; changing them (`queue-ctl pause/scale/rate/park`) is an operator action.
GRANT SELECT ON __SCHEMA__.queues, __SCHEMA__.worker_parks TO __WORKER_ROLE__;
-- The rate limit's token bucket lives on the queue row and the claim takes from
-- it through take_rate_tokens, a SECURITY DEFINER function: the worker can take
-- tokens but not write the bucket itself (EXECUTE is revoked from PUBLIC).
GRANT EXECUTE ON FUNCTION __SCHEMA__.take_rate_tokens(text, integer) TO __WORKER_ROLE__;
-- Per-key concurrency limits (migration 0031): the claim calls concurrency_free,
-- a SECURITY DEFINER function that reads the operators' limits.
GRANT EXECUTE ON FUNCTION __SCHEMA__.concurrency_free(text, integer) TO __WORKER_ROLE__;
-- With per-key rates (migration 0033) the claim calls the three-argument form,
-- which runs as the worker and reads the operators' limits and buckets.
GRANT EXECUTE ON FUNCTION __SCHEMA__.concurrency_free(text, integer, integer) TO __WORKER_ROLE__;
GRANT SELECT ON __SCHEMA__.concurrency_limits, __SCHEMA__.rate_buckets TO __WORKER_ROLE__;
-- The status guard (run as the claiming role) takes a claimed job's tokens
-- through rate_buckets_spend, SECURITY DEFINER like take_rate_tokens.
GRANT EXECUTE ON FUNCTION __SCHEMA__.rate_buckets_spend(text, integer) TO __WORKER_ROLE__;
-- The claim reads a workflow node's parents (their results, for ctx.parents)
-- through the edges. Ending a node updates the workflow tables through the
-- jobs_workflow_moved trigger, a SECURITY DEFINER function: no grant needed.
GRANT SELECT ON __SCHEMA__.job_deps TO __WORKER_ROLE__;
-- Not granted to any group: give_back_jobs (the lease reaper's and fast
-- recovery's transition) is the orchestrator's, which runs as the owner.

-- Producer: insert jobs (Client.enqueue, enqueue_many, the SQL function) and read
-- them back. enqueue_many draws ids with nextval() on the id sequence first.
GRANT SELECT, INSERT ON __SCHEMA__.jobs TO __PRODUCER_ROLE__;
-- Reading a job back by id (get, wait, list) goes through jobs_all: jobs and the
-- archive of succeeded jobs (migration 0027); the view reads with its owner's rights.
GRANT SELECT ON __SCHEMA__.jobs_all TO __PRODUCER_ROLE__;
-- An enqueue fills the options its caller left unset from the task's published
-- defaults (migration 0028).
GRANT SELECT ON __SCHEMA__.task_defaults TO __PRODUCER_ROLE__;
-- A client holding an imported job's old id reads it through the import map
-- (migration 0029, `queue-ctl import`).
GRANT SELECT ON __SCHEMA__.imported_ids TO __PRODUCER_ROLE__;
-- A job with a partition key gets its fair-share tag in the insert trigger,
-- which runs as the inserting role and reads the partition's weight (0032).
GRANT SELECT ON __SCHEMA__.partition_weights TO __PRODUCER_ROLE__;
GRANT USAGE ON SEQUENCE __SCHEMA__.jobs_id_seq TO __PRODUCER_ROLE__;
GRANT EXECUTE ON FUNCTION __SCHEMA__.enqueue(text, jsonb, text, integer, timestamptz, integer,
    text, text, text, integer, integer, text, text) TO __PRODUCER_ROLE__;

-- Workflows: start one and give an input node its value (both SECURITY
-- DEFINER functions, EXECUTE revoked from PUBLIC), and read them back.
GRANT EXECUTE ON FUNCTION __SCHEMA__.start_workflow(text, jsonb, text, text, text),
    __SCHEMA__.provide_input(bigint, text, jsonb) TO __PRODUCER_ROLE__;
GRANT SELECT ON __SCHEMA__.workflows, __SCHEMA__.workflow_tallies, __SCHEMA__.job_deps,
    __SCHEMA__.workflow_node_ids TO __PRODUCER_ROLE__;

-- Monitor: read everything the views and dashboards read.
GRANT SELECT ON __SCHEMA__.jobs, __SCHEMA__.jobs_all, __SCHEMA__.job_events, __SCHEMA__.workers,
    __SCHEMA__.job_transitions, __SCHEMA__.queues, __SCHEMA__.worker_parks,
    __SCHEMA__.workflows, __SCHEMA__.workflow_tallies, __SCHEMA__.job_deps, __SCHEMA__.job_gates,
    __SCHEMA__.workflow_node_ids, __SCHEMA__.schedules, __SCHEMA__.schedule_runs,
    __SCHEMA__.task_defaults, __SCHEMA__.task_publications, __SCHEMA__.imported_ids,
    __SCHEMA__.concurrency_limits, __SCHEMA__.partition_weights, __SCHEMA__.rate_buckets
    TO __MONITOR_ROLE__;
-- The audit of operator controls (migration 0034, `queue-ctl audit`): read
-- only; the operator layer writes it as the owner, in each control's transaction.
GRANT SELECT ON __SCHEMA__.control_events TO __MONITOR_ROLE__;
