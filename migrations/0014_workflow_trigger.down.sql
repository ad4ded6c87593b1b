-- Revert to one trigger call that calls workflow_tally and workflow_release
-- (0009's functions, 0007's trigger function and WHEN), and the guard of
-- 0011 (0001's function behind 0011's WHEN).
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM __SCHEMA__.job_transitions t
        WHERE t.from_status = OLD.status AND t.to_status = NEW.status
    ) THEN
        RAISE EXCEPTION 'queue-engine: job % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;

DROP TRIGGER jobs_workflow_moved ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_workflow_moved
    AFTER UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW
    WHEN (NEW.workflow_id IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
          AND (OLD.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
               OR NEW.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')))
    EXECUTE FUNCTION __SCHEMA__.jobs_workflow_moved();

DROP TRIGGER jobs_guard_transition ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_guard_transition
    BEFORE UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NOT (
        (OLD.status = 'queued' AND NEW.status = 'running')
        OR (OLD.status = 'running'
            AND NEW.status IN ('succeeded', 'failed', 'queued', 'canceled', 'skipped'))))
    EXECUTE FUNCTION __SCHEMA__.jobs_guard_transition();

CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_workflow_moved() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF __SCHEMA__.workflow_final(OLD.status) OR __SCHEMA__.workflow_final(NEW.status) THEN
        PERFORM __SCHEMA__.workflow_tally(NEW.workflow_id, NEW.id, OLD.status, NEW.status);
    END IF;
    IF __SCHEMA__.workflow_final(NEW.status) AND NOT __SCHEMA__.workflow_final(OLD.status) THEN
        PERFORM __SCHEMA__.workflow_release(NEW.id, NEW.status, NEW.node,
                                            TG_TABLE_SCHEMA || '.jobs', false);
    END IF;
    RETURN NULL;
END;
$$;

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

DROP FUNCTION __SCHEMA__.workflow_doom(bigint, text, text);
DROP FUNCTION __SCHEMA__.workflow_release_hits(bigint[], text, text, text);
DROP FUNCTION __SCHEMA__.workflow_shard_done(bigint);
