-- Revert the hand-over and the two-step release. A job that was handed over
-- keeps its state; only future 'waiting' -> 'running' moves are refused (the
-- worker of the older release never sends the hand-over).
DELETE FROM __SCHEMA__.job_transitions WHERE from_status = 'waiting' AND to_status = 'running';

DROP FUNCTION __SCHEMA__.workflow_counts(bigint);

-- The tally as migration 0007 made it.
CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_tally(
    p_workflow bigint, p_job bigint, p_from text, p_to text
) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    was_final boolean := __SCHEMA__.workflow_final(p_from);
    now_final boolean := __SCHEMA__.workflow_final(p_to);
    n_shards  integer;
    left_open integer;
    t         record;
BEGIN
    SELECT w.shards INTO n_shards FROM __SCHEMA__.workflows w WHERE w.id = p_workflow;
    IF n_shards IS NULL THEN
        RETURN;  -- the workflow row is gone (pruned): nothing to count
    END IF;
    UPDATE __SCHEMA__.workflow_tallies SET
        unfinished = unfinished + (CASE WHEN was_final THEN 1 ELSE 0 END)
                                - (CASE WHEN now_final THEN 1 ELSE 0 END),
        succeeded = succeeded + (p_to = 'succeeded')::int - (p_from = 'succeeded')::int,
        failed    = failed    + (p_to = 'failed')::int    - (p_from = 'failed')::int,
        canceled  = canceled  + (p_to = 'canceled')::int  - (p_from = 'canceled')::int,
        lost      = lost      + (p_to = 'lost')::int      - (p_from = 'lost')::int,
        skipped   = skipped   + (p_to = 'skipped')::int   - (p_from = 'skipped')::int
    WHERE workflow_id = p_workflow AND shard = (p_job % n_shards)::int
    RETURNING unfinished INTO left_open;
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

-- The release as migration 0007 made it.
CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_release(
    p_parent bigint, p_status text, p_node text, p_channel text, p_bad_only boolean
) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = auto
AS $$
DECLARE
    ready_ids bigint[];
BEGIN
    IF NOT p_bad_only THEN
        -- Edges whose requirement is met: one off the gate (if any), then one off
        -- the child for each gate that reached zero and each ungated edge.
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
        ),
        hits AS (
            SELECT ok.child_id FROM ok WHERE ok.gate IS NULL
            UNION ALL
            SELECT gd.child_id FROM gated gd WHERE gd.pending = 0
        ),
        child_locks AS MATERIALIZED (
            SELECT j.id FROM __SCHEMA__.jobs j
            WHERE j.id IN (SELECT h.child_id FROM hits h) AND j.status = 'waiting'
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
            FROM (SELECT hc.child_id, count(*)::int AS n FROM hits hc GROUP BY hc.child_id) h
            WHERE j.id = h.child_id AND j.id IN (SELECT cl.id FROM child_locks cl)
              AND j.status = 'waiting'
            RETURNING j.id, j.queue, j.status
        ),
        ready_events AS (
            INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
            SELECT r.id, 'ready', 'waiting', 'queued', 0,
                   format('its last parent ended (node %s %s)', p_node, p_status)
            FROM released r WHERE r.status = 'queued'
        ),
        wake AS (
            SELECT pg_notify(p_channel, q.queue)
            FROM (SELECT DISTINCT r.queue FROM released r WHERE r.status = 'queued') q
        )
        SELECT array_agg(r.id) INTO ready_ids
        FROM released r CROSS JOIN (SELECT count(*) FROM wake) w;
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
