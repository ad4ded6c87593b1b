-- queue-engine: a node's end without the workflow row, and a release without
-- regrouping its children. __SCHEMA__ is replaced by the quoted engine schema
-- name. Design: docs/internals/workflows.md, "What a node's end costs".
--
-- A node's end counts itself into its workflow's tally shard, node id % shards.
-- The shard count (16, or the node count for a workflow of fewer nodes) lives on
-- the workflow row, so 0018's tally UPDATE joined `workflows` for every node's
-- end: about 35,000 of a fan part's 1.66 million instructions. A shard with no
-- node needs no row (start_workflow only inserts the shards its nodes fall in),
-- so a small workflow can count by id % 16 as well as a wide one: from now on
-- every workflow gets 16 shards, and the trigger computes the shard without a
-- lookup. A workflow started before this migration with fewer shards keeps its
-- own count: workflow_few_shards_upto() returns the highest such id (0 when
-- there is none), fixed here, and those take 0018's statement. A success, the
-- common end, sets only the two counts it changes (another 17,000).
--
-- workflow_release_hits no longer regroups its hits (unnest, GROUP BY, a hash
-- semi-join with the locked rows): each child appears once in them, so the
-- UPDATE joins the locked rows by id and takes one off; the 'ready' message is
-- formatted once per call, not per child. 180,000 -> 170,000 instructions per
-- released child.
--
-- Measured: bench/README.md, "A node's end without the workflow row (0019)".
-- Online-safety: a SHARE ROW EXCLUSIVE lock on workflows (no workflow starts
-- while the boundary is read and the functions are replaced; a node's end that
-- closes a shard waits for it), no lock on jobs and no scan. CREATE OR REPLACE
-- of three functions, one new function. (The trigger's own change, which
-- locks jobs, is migration 0020: one table lock per migration, so a
-- migration's locks can never be taken in the opposite order of a worker's.)

LOCK TABLE __SCHEMA__.workflows IN SHARE ROW EXCLUSIVE MODE;

DO $migration$
DECLARE
    upto bigint;
BEGIN
    SELECT coalesce(max(w.id), 0) INTO upto FROM __SCHEMA__.workflows w WHERE w.shards < 16;
    EXECUTE format(
        $f$CREATE FUNCTION __SCHEMA__.workflow_few_shards_upto() RETURNS bigint
           LANGUAGE sql IMMUTABLE PARALLEL SAFE
           AS 'SELECT %s::bigint'$f$, upto);
END;
$migration$;
COMMENT ON FUNCTION __SCHEMA__.workflow_few_shards_upto() IS
    'The highest id of a workflow started before migration 0019 with fewer than 16 tally shards '
    '(0: none); fixed by that migration. Later workflows count a node into shard id % 16.';

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
    edges     bigint;
    gated     bigint;
    one_child bigint;
    one_gate  smallint;
    left_in   integer;
BEGIN
    IF NOT (was_final OR now_final) OR OLD.status = NEW.status THEN
        RETURN NULL;  -- a node's readiness, claim or retried attempt: nothing to count
    END IF;
    IF was_final OR NOT now_final THEN
        PERFORM __SCHEMA__.workflow_tally(NEW.workflow_id, NEW.id, OLD.status, NEW.status);
        RETURN NULL;
    END IF;
    IF NEW.workflow_id <= __SCHEMA__.workflow_few_shards_upto() THEN
        -- Started before 0019: it may have fewer shards (id % shards).
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
        RETURNING x.unfinished INTO left_open;
    ELSIF NEW.status = 'succeeded' THEN
        UPDATE __SCHEMA__.workflow_tallies x
        SET unfinished = x.unfinished - 1, succeeded = x.succeeded + 1
        WHERE x.workflow_id = NEW.workflow_id AND x.shard = (NEW.id % 16)::int
        RETURNING x.unfinished INTO left_open;
    ELSE
        UPDATE __SCHEMA__.workflow_tallies x SET
            unfinished = x.unfinished - 1,
            failed    = x.failed    + (NEW.status = 'failed')::int,
            canceled  = x.canceled  + (NEW.status = 'canceled')::int,
            lost      = x.lost      + (NEW.status = 'lost')::int,
            skipped   = x.skipped   + (NEW.status = 'skipped')::int
        WHERE x.workflow_id = NEW.workflow_id AND x.shard = (NEW.id % 16)::int
        RETURNING x.unfinished INTO left_open;
    END IF;
    SELECT count(*), count(d.gate), min(d.child_id), min(d.gate)
    INTO edges, gated, one_child, one_gate
    FROM __SCHEMA__.job_deps d
    WHERE d.parent_id = NEW.id
      AND (NEW.status = 'succeeded' OR d.requires = 'finished');
    IF edges = 1 AND gated = 1 THEN
        UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
        WHERE g.child_id = one_child AND g.gate = one_gate
        RETURNING g.pending INTO left_in;
        IF left_in = 0 THEN
            hits := ARRAY[one_child];
        END IF;
    ELSIF edges = 1 THEN
        IF EXISTS (SELECT 1 FROM __SCHEMA__.jobs c
                   WHERE c.id = one_child AND c.status = 'waiting') THEN
            hits := ARRAY[one_child];
        END IF;
    ELSIF edges > 1 THEN
        WITH ok AS (
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
        gate_hits AS (
            UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
            FROM gate_locks l
            WHERE g.child_id = l.child_id AND g.gate = l.gate
            RETURNING g.child_id, g.pending
        )
        SELECT array_agg(x.child_id) INTO hits FROM (
            SELECT ok.child_id FROM ok
            JOIN __SCHEMA__.jobs c ON c.id = ok.child_id AND c.status = 'waiting'
            WHERE ok.gate IS NULL
            UNION ALL
            SELECT gh.child_id FROM gate_hits gh WHERE gh.pending = 0) x;
    END IF;
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


CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_release_hits(
    p_hits bigint[], p_status text, p_node text, p_channel text
) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    woken bigint;
    msg   text := format('its last parent ended (node %s %s)', p_node, p_status);
BEGIN
    -- p_hits holds distinct ids: one parent has one edge to a child (job_deps'
    -- key), and that edge takes one off the child, through its gate or not.
    WITH child_locks AS MATERIALIZED (
        SELECT j.id FROM __SCHEMA__.jobs j
        WHERE j.id = ANY (p_hits) AND j.status = 'waiting'
        ORDER BY j.id
        FOR UPDATE
    ),
    released AS (
        UPDATE __SCHEMA__.jobs j SET
            pending_parents = j.pending_parents - 1,
            status = CASE WHEN j.pending_parents = 1 AND j.task <> 'queue-engine:input'
                          THEN 'queued' ELSE j.status END,
            available_at = CASE WHEN j.pending_parents = 1
                                THEN greatest(j.available_at, now())
                                     + CASE WHEN j.task = 'queue-engine:input'
                                            THEN make_interval(secs => coalesce(j.timeout_s, 0))
                                            ELSE interval '0' END
                                ELSE j.available_at END
        FROM child_locks cl
        WHERE j.id = cl.id AND j.status = 'waiting'
        RETURNING j.id, j.queue, j.status
    ),
    ready_events AS (
        INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
        SELECT r.id, 'ready', 'waiting', 'queued', 0, msg
        FROM released r WHERE r.status = 'queued'
    )
    SELECT count(*) INTO woken
    FROM (SELECT DISTINCT r.queue FROM released r WHERE r.status = 'queued') q,
         LATERAL (SELECT pg_notify(p_channel, q.queue)) n;
END;
$$;

-- Every workflow gets 16 tally shards (rows only for the shards its nodes fall in).
CREATE OR REPLACE FUNCTION __SCHEMA__.start_workflow(
    p_name text, p_nodes jsonb, p_idempotency_key text DEFAULT NULL,
    p_producer text DEFAULT NULL, p_schedule text DEFAULT NULL
) RETURNS TABLE (workflow_id bigint, created boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wf      bigint;
    n       integer;
    n_shard integer;
    ids     bigint[];
    bad     text;
BEGIN
    IF jsonb_typeof(p_nodes) IS DISTINCT FROM 'array' OR jsonb_array_length(p_nodes) < 1 THEN
        RAISE EXCEPTION 'queue-engine: a workflow needs a JSON array of at least one node'
            USING ERRCODE = 'check_violation';
    END IF;
    n := jsonb_array_length(p_nodes);
    -- Refuse, before writing anything: a repeated node name, an edge to a node
    -- that is not earlier in the list (unknown, itself, or later: a cycle), an
    -- edge given twice, an unknown requirement.
    WITH nodes AS (
        SELECT e.v ->> 'node' AS node, e.ord
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS e(v, ord)
    ),
    refs AS (
        SELECT c.v ->> 'node' AS child, c.ord AS child_ord, a.value ->> 'node' AS parent,
               coalesce(a.value ->> 'requires', 'succeeded') AS requires
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS c(v, ord)
        CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.v -> 'after', '[]'::jsonb)) AS a
    )
    SELECT x.problem INTO bad FROM (
        (SELECT format('node %s appears more than once', coalesce(nd.node, '(no name)')) AS problem
         FROM nodes nd GROUP BY nd.node HAVING count(*) > 1 OR nd.node IS NULL LIMIT 1)
        UNION ALL
        (SELECT format('node %s: after names %s, which is not an earlier node of this workflow',
                       r.child, coalesce(r.parent, '(no name)'))
         FROM refs r LEFT JOIN nodes p ON p.node = r.parent
         WHERE p.ord IS NULL OR p.ord >= r.child_ord LIMIT 1)
        UNION ALL
        (SELECT format('node %s: after names %s twice', r.child, r.parent)
         FROM refs r GROUP BY r.child, r.parent HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('node %s: requires must be succeeded or finished, not %s',
                       r.child, r.requires)
         FROM refs r WHERE r.requires NOT IN ('succeeded', 'finished') LIMIT 1)
    ) x LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'queue-engine: %', bad USING ERRCODE = 'check_violation';
    END IF;

    INSERT INTO __SCHEMA__.workflows (name, idempotency_key, node_count, shards, open_shards,
                                      producer, schedule)
    VALUES (p_name, p_idempotency_key, n, 16, least(16, n), p_producer, p_schedule)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id INTO wf;
    IF wf IS NULL THEN
        RETURN QUERY SELECT w.id, false FROM __SCHEMA__.workflows w
                     WHERE w.idempotency_key = p_idempotency_key;
        RETURN;
    END IF;
    n_shard := 16;  -- always (0019): a node's shard is its id % 16, no lookup
    SELECT array_agg(nextval(pg_get_serial_sequence('__SCHEMA__.jobs', 'id')) ORDER BY g)
    INTO ids FROM generate_series(1, n) AS g;

    INSERT INTO __SCHEMA__.jobs (
        id, workflow_id, node, status, pending_parents, task, queue, args, priority,
        available_at, max_attempts, timeout_s, lease_ttl_s, lock_key, partition_key, producer,
        affinity_key
    )
    SELECT ids[e.ord], wf, e.v ->> 'node',
           CASE WHEN e.np > 0 OR e.v ->> 'task' = 'queue-engine:input'
                THEN 'waiting' ELSE 'queued' END,
           least(e.np, 16),
           e.v ->> 'task',
           coalesce(e.v ->> 'queue', 'default'),
           coalesce(e.v -> 'args', '{}'::jsonb),
           coalesce((e.v ->> 'priority')::smallint, 100),
           coalesce((e.v ->> 'run_at')::timestamptz,
                    now() + make_interval(secs => coalesce((e.v ->> 'delay_s')::float8, 0)))
             + CASE WHEN e.np = 0 AND e.v ->> 'task' = 'queue-engine:input'
                    THEN make_interval(secs => coalesce((e.v ->> 'timeout_s')::int, 0))
                    ELSE interval '0' END,
           coalesce((e.v ->> 'max_attempts')::int, 5),
           (e.v ->> 'timeout_s')::int, (e.v ->> 'lease_ttl_s')::int,
           e.v ->> 'lock_key', e.v ->> 'partition_key',
           coalesce(e.v ->> 'producer', p_producer), e.v ->> 'affinity_key'
    FROM (SELECT v, ord, jsonb_array_length(coalesce(v -> 'after', '[]'::jsonb)) AS np
          FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS x(v, ord)) e
    ORDER BY e.ord;

    WITH nodes AS (
        SELECT e.v ->> 'node' AS node, e.ord
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS e(v, ord)
    ),
    refs AS (
        SELECT c.ord AS child_ord, p.ord AS parent_ord,
               coalesce(a.value ->> 'requires', 'succeeded') AS requires,
               a.ord AS k, jsonb_array_length(c.v -> 'after') AS np
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS c(v, ord)
        CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.v -> 'after', '[]'::jsonb))
            WITH ORDINALITY AS a(value, ord)
        JOIN nodes p ON p.node = a.value ->> 'node'
    ),
    deps AS (
        INSERT INTO __SCHEMA__.job_deps (parent_id, child_id, requires, gate)
        SELECT ids[r.parent_ord], ids[r.child_ord], r.requires,
               CASE WHEN r.np > 16 THEN ((r.k - 1) % 16)::smallint END
        FROM refs r
        ORDER BY 1, 2
        RETURNING child_id, gate
    )
    INSERT INTO __SCHEMA__.job_gates (child_id, gate, pending)
    SELECT d.child_id, d.gate, count(*) FROM deps d WHERE d.gate IS NOT NULL
    GROUP BY d.child_id, d.gate;

    INSERT INTO __SCHEMA__.workflow_tallies (workflow_id, shard, unfinished)
    SELECT wf, (i % n_shard)::int, count(*) FROM unnest(ids) AS i GROUP BY 2;
    UPDATE __SCHEMA__.workflows w
    SET open_shards = (SELECT count(*) FROM __SCHEMA__.workflow_tallies t WHERE t.workflow_id = wf)
    WHERE w.id = wf;

    RETURN QUERY SELECT wf, true;
END;
$$;
