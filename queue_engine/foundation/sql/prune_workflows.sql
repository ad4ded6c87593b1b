-- Retention of workflows (leader only): delete one bounded batch of finished
-- workflows whose state is one of %(states)s and that finished before
-- %(cutoff)s, as a whole, in one statement: the workflow row (its tally shards
-- go by ON DELETE CASCADE), its node names (workflow_node_ids, which give its
-- jobs), its jobs, their job_events, job_deps and job_gates.
-- A workflow's nodes are never pruned one by one (prune_jobs.sql skips them), so
-- a running workflow keeps every node its children read.
--   * workflows_finished_at_idx drives the scan, oldest first; %(after)s (NULL
--     at the start of a run) is the newest finished_at of the previous batch.
--   * The batch is bounded in jobs, not only in workflows: workflows are taken
--     oldest first while their nodes add up to at most %(limit)s (always at
--     least one, so a workflow larger than the limit still goes, alone).
--   * FOR UPDATE SKIP LOCKED on the workflow row: a workflow an operator is
--     retrying (retry_workflow locks the row first) is left for a later run; a
--     retry that comes after this lock finds the workflow gone.
--   * Nothing fires the workflow trigger: it is AFTER UPDATE OF finished_at,
--     and this statement only deletes.
--   * Edges are deleted by parent (job_deps' primary key) and gates by child:
--     every edge of a workflow has both ends in it.
-- Returns one row: workflows deleted by state, jobs deleted, events deleted, edge and
-- gate rows deleted, whether more may be left (a full batch, or workflows the
-- job bound left out), and the newest finished_at taken (the next %(after)s).
WITH candidates AS MATERIALIZED (
    SELECT w.id, w.finished_at, w.node_count
    FROM __SCHEMA__.workflows w
    WHERE w.finished_at < %(cutoff)s::timestamptz
      AND w.finished_at >= coalesce(%(after)s::timestamptz, '-infinity'::timestamptz)
      AND w.state = ANY (%(states)s::text[])
    ORDER BY w.finished_at, w.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
chosen AS MATERIALIZED (
    SELECT c.id, c.finished_at
    FROM (SELECT c.id, c.finished_at, c.node_count,
                 sum(c.node_count) OVER (ORDER BY c.finished_at, c.id) AS upto
          FROM candidates c) c
    WHERE c.upto <= %(limit)s OR c.upto = c.node_count
),
wf AS (
    DELETE FROM __SCHEMA__.workflows w
    USING chosen c
    WHERE w.id = c.id AND w.state <> 'running'
    RETURNING w.id, w.state
),
names AS (
    DELETE FROM __SCHEMA__.workflow_node_ids n
    WHERE n.workflow_id = ANY (ARRAY(SELECT wf.id FROM wf))
    RETURNING n.job_id
),
jobs AS (
    DELETE FROM __SCHEMA__.jobs j
    WHERE j.id = ANY (ARRAY(SELECT n.job_id FROM names n))
    RETURNING j.id
),
ev AS (
    DELETE FROM __SCHEMA__.job_events e
    WHERE e.job_id = ANY (ARRAY(SELECT j.id FROM jobs j))
    RETURNING e.id
),
deps AS (
    DELETE FROM __SCHEMA__.job_deps d
    WHERE d.parent_id = ANY (ARRAY(SELECT j.id FROM jobs j))
    RETURNING d.child_id
),
gates AS (
    DELETE FROM __SCHEMA__.job_gates g
    WHERE g.child_id = ANY (ARRAY(SELECT j.id FROM jobs j))
    RETURNING g.child_id
)
SELECT coalesce((SELECT jsonb_object_agg(c.state, c.n)
                 FROM (SELECT wf.state, count(*) AS n FROM wf GROUP BY wf.state) c),
                '{}'::jsonb) AS workflows_by_state,
       (SELECT count(*) FROM jobs) AS jobs,
       (SELECT count(*) FROM ev) AS events,
       (SELECT count(*) FROM deps) + (SELECT count(*) FROM gates) AS edges,
       (SELECT count(*) FROM candidates) >= %(limit)s
           OR (SELECT count(*) FROM candidates) > (SELECT count(*) FROM chosen) AS more,
       (SELECT max(c.finished_at) FROM chosen c) AS last_finished_at
