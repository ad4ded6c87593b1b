-- Input timeouts (leader only, orchestrator/input_timeouts.py): fail one bounded
-- batch of input nodes whose value did not come in time.
--   * An input node awaits its value once its parents have ended (status
--     'waiting', pending_parents 0); its available_at was then set to that instant
--     plus timeout_s (migration 0007), so "overdue" is available_at <= now.
--     jobs_waiting_input_idx drives the scan, oldest deadline first.
--   * FOR UPDATE SKIP LOCKED: a node a concurrent provide_input holds is left
--     alone (it wins; if the value came, the status check below finds 'succeeded').
--     If this statement locks first, provide_input then finds the node ended and
--     answers 'already'.
--   * The UPDATE of the status fires the workflow trigger, so the children that
--     require the input are canceled (and 'finished' edges released) in this
--     same statement, exactly as a worker's failure would.
-- %(now)s: NULL for the database's now() (tests may pin it).
WITH overdue AS MATERIALIZED (
    SELECT j.id
    FROM __SCHEMA__.jobs j
    WHERE j.status = 'waiting' AND j.task = 'queue-engine:input' AND j.timeout_s IS NOT NULL
      AND j.available_at <= coalesce(%(now)s::timestamptz, now())
      AND j.pending_parents = 0
    ORDER BY j.available_at, j.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
failed AS (
    UPDATE __SCHEMA__.jobs j SET
        status = 'failed',
        finished_at = now(),
        error = format('input not provided within %%s s', j.timeout_s)
    FROM overdue o
    WHERE j.id = o.id AND j.status = 'waiting'
    RETURNING j.id, j.workflow_id, j.node, j.timeout_s, j.error
),
ev AS (
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
    SELECT f.id, 'input_timed_out', 'waiting', 'failed', 0, f.error FROM failed f
)
SELECT f.id, f.workflow_id, f.node, f.timeout_s FROM failed f ORDER BY f.id
