-- Back to 0020: node names only on jobs (0022's down SQL rebuilt
-- jobs_workflow_node_uidx first); the lookups read jobs by workflow again.
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

CREATE OR REPLACE FUNCTION __SCHEMA__.provide_input(p_workflow bigint, p_node text, p_value jsonb)
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    j record;
BEGIN
    SELECT x.id, x.task, x.status, x.pending_parents INTO j FROM __SCHEMA__.jobs x
    WHERE x.workflow_id = p_workflow AND x.node = p_node
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'not_found';
    ELSIF j.task <> 'queue-engine:input' THEN
        RETURN 'not_input';
    ELSIF j.status <> 'waiting' THEN
        RETURN 'already';
    ELSIF j.pending_parents > 0 THEN
        RETURN 'not_ready';
    END IF;
    UPDATE __SCHEMA__.jobs SET status = 'succeeded', result = p_value, finished_at = now(),
        duration_ms = 0
    WHERE id = j.id;
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
    VALUES (j.id, 'input', 'waiting', 'succeeded', 0, 'input provided');
    RETURN 'provided';
END;
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.cancel_workflow(
    p_workflow bigint, p_message text, p_cancel_channel text
) RETURNS TABLE (canceled bigint, stopping bigint)
LANGUAGE plpgsql
AS $$
DECLARE
    wf_state text;
BEGIN
    SELECT w.state INTO wf_state FROM __SCHEMA__.workflows w WHERE w.id = p_workflow;
    IF NOT FOUND THEN
        RETURN;
    ELSIF wf_state <> 'running' THEN
        RETURN QUERY SELECT -1::bigint, -1::bigint;
        RETURN;
    END IF;
    RETURN QUERY
    WITH locked AS MATERIALIZED (
        SELECT j.id, j.status AS before FROM __SCHEMA__.jobs j
        WHERE j.workflow_id = p_workflow AND j.status IN ('waiting', 'queued', 'running')
        ORDER BY j.id
        FOR UPDATE
    ),
    upd AS (
        UPDATE __SCHEMA__.jobs j SET
            status = CASE WHEN j.status = 'running' THEN 'running' ELSE 'canceled' END,
            finished_at = CASE WHEN j.status = 'running' THEN j.finished_at ELSE now() END,
            cancel_requested = true,
            error = CASE WHEN j.status = 'running' THEN j.error ELSE p_message END
        FROM locked b
        WHERE j.id = b.id AND j.status IN ('waiting', 'queued', 'running')
        RETURNING j.id, j.status, b.before, j.attempt
    ),
    ev AS (
        INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
        SELECT u.id, CASE WHEN u.status = 'canceled' THEN 'canceled' ELSE 'cancel_requested' END,
               u.before, u.status, u.attempt, p_message
        FROM upd u
    ),
    wake AS (
        SELECT pg_notify(p_cancel_channel, u.id::text) FROM upd u WHERE u.status = 'running'
    )
    SELECT count(*) FILTER (WHERE u.status = 'canceled'),
           count(*) FILTER (WHERE u.status = 'running')
    FROM upd u CROSS JOIN (SELECT count(*) FROM wake) w;
    -- After the nodes: their ends (in the statement above) may already have
    -- ended the workflow; it ends 'canceled' either way once all have ended.
    UPDATE __SCHEMA__.workflows w SET
        cancel_requested = true,
        state = CASE WHEN w.state = 'running' THEN 'running' ELSE 'canceled' END
    WHERE w.id = p_workflow;
END;
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.retry_workflow(p_workflow bigint, p_message text, p_jobs_channel text)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    rerun    bigint[];
    n        bigint;
    par      record;
    wf_state text;
BEGIN
    SELECT w.state INTO wf_state FROM __SCHEMA__.workflows w WHERE w.id = p_workflow FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    ELSIF wf_state = 'running' THEN
        RETURN -1;
    END IF;
    WITH RECURSIVE r(id) AS (
        SELECT j.id FROM __SCHEMA__.jobs j
        WHERE j.workflow_id = p_workflow AND j.status IN ('failed', 'canceled', 'lost')
        UNION
        SELECT d.child_id FROM r
        JOIN __SCHEMA__.job_deps d ON d.parent_id = r.id
        JOIN __SCHEMA__.jobs c ON c.id = d.child_id AND c.status <> 'succeeded'
    )
    SELECT array_agg(DISTINCT r.id) INTO rerun FROM r;
    IF rerun IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE __SCHEMA__.workflows SET cancel_requested = false WHERE id = p_workflow;

    -- Gates of re-run children: parents still to end well, per gate.
    WITH counts AS (
        SELECT d.child_id, d.gate,
               count(*) FILTER (WHERE d.parent_id = ANY (rerun)
                                   OR NOT __SCHEMA__.workflow_final(pj.status)) AS pending
        FROM __SCHEMA__.job_deps d JOIN __SCHEMA__.jobs pj ON pj.id = d.parent_id
        WHERE d.child_id = ANY (rerun) AND d.gate IS NOT NULL
        GROUP BY d.child_id, d.gate
    )
    UPDATE __SCHEMA__.job_gates g SET pending = c.pending
    FROM counts c WHERE g.child_id = c.child_id AND g.gate = c.gate;

    WITH pending AS MATERIALIZED (
        SELECT j.id,
               coalesce((SELECT count(*) FROM __SCHEMA__.job_deps d
                         JOIN __SCHEMA__.jobs pj ON pj.id = d.parent_id
                         WHERE d.child_id = j.id AND d.gate IS NULL
                           AND (d.parent_id = ANY (rerun)
                                OR NOT __SCHEMA__.workflow_final(pj.status))), 0)
             + coalesce((SELECT count(*) FROM __SCHEMA__.job_gates g
                         WHERE g.child_id = j.id AND g.pending > 0), 0) AS n,
               -- A parent not re-run whose end says cancel or skip (the loop
               -- below applies it): the node must wait for that verdict, not
               -- be queued because it has nothing else to wait for.
               EXISTS (SELECT 1 FROM __SCHEMA__.job_deps d
                       JOIN __SCHEMA__.jobs pj ON pj.id = d.parent_id
                       WHERE d.child_id = j.id AND d.requires = 'succeeded'
                         AND NOT (d.parent_id = ANY (rerun))
                         AND pj.status IN ('skipped', 'failed', 'canceled', 'lost')) AS doomed
        FROM __SCHEMA__.jobs j WHERE j.id = ANY (rerun)
        ORDER BY j.id
        FOR UPDATE OF j
    ),
    upd AS (
        UPDATE __SCHEMA__.jobs j SET
            status = CASE WHEN p.n = 0 AND NOT p.doomed AND j.task <> 'queue-engine:input'
                          THEN 'queued' ELSE 'waiting' END,
            pending_parents = p.n,
            attempt = 0,
            available_at = now() + CASE WHEN p.n = 0 AND j.task = 'queue-engine:input'
                                        THEN make_interval(secs => coalesce(j.timeout_s, 0))
                                        ELSE interval '0' END,
            cancel_requested = false,
            claimed_by = NULL, lease_expires_at = NULL, heartbeat_at = NULL,
            started_at = NULL, finished_at = NULL, duration_ms = NULL,
            result = NULL, error = NULL
        FROM pending p WHERE j.id = p.id
        RETURNING j.id, j.status, j.queue
    ),
    ev AS (
        INSERT INTO __SCHEMA__.job_events (job_id, kind, to_status, attempt, message)
        SELECT u.id, 'retried', u.status, 0, p_message FROM upd u
    ),
    wake AS (
        SELECT pg_notify(p_jobs_channel, q.queue)
        FROM (SELECT DISTINCT u.queue FROM upd u WHERE u.status = 'queued') q
    )
    SELECT count(*) INTO n FROM upd u CROSS JOIN (SELECT count(*) FROM wake) w;

    -- Ended parents that are not re-run and whose verdict is cancel or skip.
    FOR par IN
        SELECT DISTINCT pj.id, pj.status, pj.node
        FROM __SCHEMA__.job_deps d JOIN __SCHEMA__.jobs pj ON pj.id = d.parent_id
        WHERE d.child_id = ANY (rerun) AND NOT (d.parent_id = ANY (rerun))
          AND d.requires = 'succeeded' AND pj.status IN ('skipped', 'failed', 'canceled', 'lost')
        ORDER BY pj.id
    LOOP
        PERFORM __SCHEMA__.workflow_release(par.id, par.status, par.node, p_jobs_channel, true);
    END LOOP;
    RETURN n;
END;
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.stuck_workflow_nodes()
RETURNS TABLE (job_id bigint, workflow_id bigint, node text, pending_parents integer)
LANGUAGE sql STABLE
AS $$
SELECT j.id, j.workflow_id, j.node, j.pending_parents
FROM __SCHEMA__.workflows w
JOIN __SCHEMA__.jobs j ON j.workflow_id = w.id AND j.status = 'waiting'
WHERE w.state = 'running'
  AND NOT EXISTS (
      SELECT 1 FROM __SCHEMA__.job_deps d JOIN __SCHEMA__.jobs p ON p.id = d.parent_id
      WHERE d.child_id = j.id AND NOT __SCHEMA__.workflow_final(p.status))
  AND (j.task <> 'queue-engine:input' OR j.pending_parents > 0)
$$;

DROP TABLE __SCHEMA__.workflow_node_ids;
