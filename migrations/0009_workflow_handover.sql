-- queue-engine: a workflow node's child handed over in its parent's finish, and
-- a release that does the least for the common cases. __SCHEMA__ is replaced by
-- the quoted engine schema name. Design: docs/internals/workflows.md, "Hand-over".
--
-- Hand-over. The worker's finish statement (queue_engine/sql/finish_and_claim_jobs.sql,
-- its --@handover variant, sent only for a workflow node's success) may move a
-- child whose last pending parent is the node it finishes straight from
-- 'waiting' to 'running' for the same worker: a new transition. A chain then
-- costs one statement per node, as plain jobs do, instead of a finish whose
-- trigger queues the child after the claim read its snapshot and a second
-- statement to claim it.
INSERT INTO __SCHEMA__.job_transitions (from_status, to_status) VALUES
    ('waiting', 'running')      -- handed over by its last parent's finish
ON CONFLICT DO NOTHING;

-- The release in two steps. The first statement takes one off the gates of the
-- met edges (locks in (child, gate) order, as before) and names the children
-- hit: a still-waiting child of an ungated edge, or a child whose gate reached
-- zero. Only when there is one does the second statement lock those children
-- by id, queue the ones at zero, write their 'ready' events and wake their
-- queues. The two common cases then cost one small statement:
--   * a part of a wide fan-in whose gate does not reach zero (9,984 of a
--     10,000-part fan-in's parts);
--   * a chain node whose child was handed over by the same statement (the
--     child is running, not waiting, by the time this trigger runs).
-- The ungated child's status is read without a lock: a child seen waiting is
-- locked and checked again in the second statement; one seen not waiting can
-- no longer need this edge (a workflow retry, the only path back to waiting,
-- is refused while a node of the workflow runs).
CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_release(
    p_parent bigint, p_status text, p_node text, p_channel text, p_bad_only boolean
) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = auto
AS $$
DECLARE
    hits  bigint[];
    woken bigint;
BEGIN
    IF NOT p_bad_only THEN
        WITH ok AS (
            SELECT d.child_id, d.gate
            FROM __SCHEMA__.job_deps d
            WHERE d.parent_id = p_parent
              AND (p_status = 'succeeded' OR d.requires = 'finished')
        ),
        gate_locks AS MATERIALIZED (
            SELECT g.child_id, g.gate
            FROM __SCHEMA__.job_gates g JOIN ok ON ok.child_id = g.child_id AND ok.gate = g.gate
            ORDER BY g.child_id, g.gate
            FOR UPDATE OF g
        ),
        gated AS (
            UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
            FROM gate_locks l
            WHERE g.child_id = l.child_id AND g.gate = l.gate
            RETURNING g.child_id, g.pending
        )
        SELECT array_agg(x.child_id) INTO hits
        FROM (
            SELECT ok.child_id FROM ok
            JOIN __SCHEMA__.jobs c ON c.id = ok.child_id AND c.status = 'waiting'
            WHERE ok.gate IS NULL
            UNION ALL
            SELECT gd.child_id FROM gated gd WHERE gd.pending = 0
        ) x;

        IF hits IS NOT NULL THEN
            WITH child_locks AS MATERIALIZED (
                SELECT j.id FROM __SCHEMA__.jobs j
                WHERE j.id = ANY (hits) AND j.status = 'waiting'
                ORDER BY j.id
                FOR UPDATE
            ),
            released AS (
                UPDATE __SCHEMA__.jobs j SET
                    pending_parents = j.pending_parents - h.n,
                    status = CASE WHEN j.pending_parents = h.n AND j.task <> 'queue-engine:input'
                                  THEN 'queued' ELSE j.status END,
                    available_at = CASE WHEN j.pending_parents = h.n
                                        THEN greatest(j.available_at, now())
                                             + CASE WHEN j.task = 'queue-engine:input'
                                                    THEN make_interval(secs => coalesce(j.timeout_s, 0))
                                                    ELSE interval '0' END
                                        ELSE j.available_at END
                FROM (SELECT u.child_id, count(*)::int AS n
                      FROM unnest(hits) AS u(child_id) GROUP BY u.child_id) h
                WHERE j.id = h.child_id AND j.id IN (SELECT cl.id FROM child_locks cl)
                  AND j.status = 'waiting'
                RETURNING j.id, j.queue, j.status
            ),
            ready_events AS (
                INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
                SELECT r.id, 'ready', 'waiting', 'queued', 0,
                       format('its last parent ended (node %s %s)', p_node, p_status)
                FROM released r WHERE r.status = 'queued'
            )
            SELECT count(*) INTO woken
            FROM (SELECT DISTINCT r.queue FROM released r WHERE r.status = 'queued') q,
                 LATERAL (SELECT pg_notify(p_channel, q.queue)) n;
        END IF;
    END IF;

    IF p_status <> 'succeeded' THEN
        -- Edges that require success: the child, and every waiting descendant
        -- behind 'succeeded' edges, is canceled (a parent failed, was canceled
        -- or lost) or skipped (a parent was skipped). Their own ends release
        -- their 'finished' edges through this trigger again, one level deeper.
        WITH RECURSIVE doomed(id) AS (
            SELECT d.child_id FROM __SCHEMA__.jobs c
            JOIN __SCHEMA__.job_deps d ON d.child_id = c.id
            WHERE d.parent_id = p_parent AND d.requires = 'succeeded' AND c.status = 'waiting'
            UNION
            SELECT d2.child_id
            FROM doomed x
            JOIN __SCHEMA__.job_deps d2 ON d2.parent_id = x.id AND d2.requires = 'succeeded'
            JOIN __SCHEMA__.jobs c2 ON c2.id = d2.child_id AND c2.status = 'waiting'
        ),
        locked AS MATERIALIZED (
            SELECT j.id FROM __SCHEMA__.jobs j
            WHERE j.id IN (SELECT dm.id FROM doomed dm) AND j.status = 'waiting'
            ORDER BY j.id
            FOR UPDATE
        ),
        ended AS (
            UPDATE __SCHEMA__.jobs j SET
                status = CASE WHEN p_status = 'skipped' THEN 'skipped' ELSE 'canceled' END,
                finished_at = now(),
                error = format('%s: upstream node %s %s',
                               CASE WHEN p_status = 'skipped' THEN 'skipped' ELSE 'canceled' END,
                               p_node, p_status)
            WHERE j.id IN (SELECT l.id FROM locked l) AND j.status = 'waiting'
            RETURNING j.id, j.status, j.error
        )
        INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
        SELECT e.id, e.status, 'waiting', e.status, 0, e.error FROM ended e;
    END IF;
END;
$$;

-- The tally in one statement where it took two: the shard count is read by
-- the UPDATE itself (a join to the workflow's row) instead of a SELECT before
-- it. A node's end runs this once; on a wide fan-out that is every part.
CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_tally(
    p_workflow bigint, p_job bigint, p_from text, p_to text
) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    was_final boolean := __SCHEMA__.workflow_final(p_from);
    now_final boolean := __SCHEMA__.workflow_final(p_to);
    left_open integer;
    t         record;
BEGIN
    UPDATE __SCHEMA__.workflow_tallies x SET
        unfinished = x.unfinished + (CASE WHEN was_final THEN 1 ELSE 0 END)
                                  - (CASE WHEN now_final THEN 1 ELSE 0 END),
        succeeded = x.succeeded + (p_to = 'succeeded')::int - (p_from = 'succeeded')::int,
        failed    = x.failed    + (p_to = 'failed')::int    - (p_from = 'failed')::int,
        canceled  = x.canceled  + (p_to = 'canceled')::int  - (p_from = 'canceled')::int,
        lost      = x.lost      + (p_to = 'lost')::int      - (p_from = 'lost')::int,
        skipped   = x.skipped   + (p_to = 'skipped')::int   - (p_from = 'skipped')::int
    FROM __SCHEMA__.workflows w
    WHERE w.id = p_workflow
      AND x.workflow_id = p_workflow AND x.shard = (p_job % w.shards)::int
    RETURNING x.unfinished INTO left_open;
    IF NOT FOUND THEN
        RETURN;  -- the workflow row is gone (pruned): nothing to count
    END IF;
    IF now_final AND NOT was_final AND left_open = 0 THEN
        -- This shard has no unfinished node left. Shards close one at a time
        -- on the workflow row (its lock is held to commit), so the closer of
        -- the last one sees every other shard's counts committed below.
        UPDATE __SCHEMA__.workflows SET open_shards = open_shards - 1
        WHERE id = p_workflow
        RETURNING open_shards INTO left_open;
        IF left_open = 0 THEN
            SELECT sum(x.failed) AS failed, sum(x.lost) AS lost, sum(x.canceled) AS canceled
            INTO t FROM __SCHEMA__.workflow_tallies x WHERE x.workflow_id = p_workflow;
            UPDATE __SCHEMA__.workflows w SET
                state = CASE
                    WHEN w.cancel_requested THEN 'canceled'
                    WHEN t.failed + t.lost > 0 THEN 'failed'
                    WHEN t.canceled > 0 THEN 'canceled'
                    ELSE 'succeeded' END,
                finished_at = now()
            WHERE w.id = p_workflow;
        END IF;
    ELSIF was_final AND NOT now_final AND left_open = 1 THEN
        UPDATE __SCHEMA__.workflows SET
            open_shards = open_shards + 1, state = 'running', finished_at = NULL
        WHERE id = p_workflow;
    END IF;
END;
$$;

-- A workflow's counts: the sum of its (at most 16) tally shards. One
-- definition for every reader (get_workflow.sql, list_workflows.sql); a plain
-- SQL function, which the planner inlines into the query that calls it, and
-- which runs with the caller's rights (its roles already read the tallies).
CREATE FUNCTION __SCHEMA__.workflow_counts(p_workflow bigint)
RETURNS TABLE (unfinished bigint, succeeded bigint, failed bigint, canceled bigint,
               lost bigint, skipped bigint)
LANGUAGE sql STABLE
AS $$
    SELECT sum(x.unfinished), sum(x.succeeded), sum(x.failed), sum(x.canceled),
           sum(x.lost), sum(x.skipped)
    FROM __SCHEMA__.workflow_tallies x WHERE x.workflow_id = p_workflow
$$;
