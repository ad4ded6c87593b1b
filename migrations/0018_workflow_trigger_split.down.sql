-- Back to 0014's trigger function: one statement of four CTEs for every node end.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_workflow_moved() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    was_final boolean := OLD.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped');
    now_final boolean := NEW.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped');
    left_open integer;
    hits      bigint[];
BEGIN
    IF NOT (was_final OR now_final) OR OLD.status = NEW.status THEN
        RETURN NULL;  -- a node's readiness, claim or retried attempt: nothing to count
    END IF;
    IF was_final OR NOT now_final THEN
        PERFORM __SCHEMA__.workflow_tally(NEW.workflow_id, NEW.id, OLD.status, NEW.status);
        RETURN NULL;
    END IF;
    WITH tally AS (
        UPDATE __SCHEMA__.workflow_tallies x SET
            unfinished = x.unfinished - 1,
            succeeded = x.succeeded + (NEW.status = 'succeeded')::int,
            failed    = x.failed    + (NEW.status = 'failed')::int,
            canceled  = x.canceled  + (NEW.status = 'canceled')::int,
            lost      = x.lost      + (NEW.status = 'lost')::int,
            skipped   = x.skipped   + (NEW.status = 'skipped')::int
        FROM __SCHEMA__.workflows w
        WHERE w.id = NEW.workflow_id
          AND x.workflow_id = NEW.workflow_id AND x.shard = (NEW.id % w.shards)::int
        RETURNING x.unfinished
    ),
    ok AS (
        SELECT d.child_id, d.gate
        FROM __SCHEMA__.job_deps d
        WHERE d.parent_id = NEW.id
          AND (NEW.status = 'succeeded' OR d.requires = 'finished')
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
    SELECT (SELECT t.unfinished FROM tally t),
           (SELECT array_agg(x.child_id) FROM (
                SELECT ok.child_id FROM ok
                JOIN __SCHEMA__.jobs c ON c.id = ok.child_id AND c.status = 'waiting'
                WHERE ok.gate IS NULL
                UNION ALL
                SELECT gd.child_id FROM gated gd WHERE gd.pending = 0) x)
    INTO left_open, hits;
    IF left_open = 0 THEN
        PERFORM __SCHEMA__.workflow_shard_done(NEW.workflow_id);
    END IF;
    IF hits IS NOT NULL THEN
        PERFORM __SCHEMA__.workflow_release_hits(hits, NEW.status, NEW.node,
                                                 TG_TABLE_SCHEMA || '.jobs');
    END IF;
    IF NEW.status <> 'succeeded' THEN
        PERFORM __SCHEMA__.workflow_doom(NEW.id, NEW.status, NEW.node);
    END IF;
    RETURN NULL;
END;
$$;
