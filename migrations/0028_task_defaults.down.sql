-- queue-engine: undo 0028_task_defaults. Jobs keep the values they were
-- enqueued with; the published defaults are dropped with their tables.
CREATE OR REPLACE FUNCTION __SCHEMA__.enqueue(
    p_task text,
    p_args jsonb DEFAULT '{}'::jsonb,
    p_queue text DEFAULT 'default',
    p_priority integer DEFAULT 100,
    p_run_at timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT 5,
    p_idempotency_key text DEFAULT NULL,
    p_dedupe_key text DEFAULT NULL,
    p_lock_key text DEFAULT NULL,
    p_timeout_s integer DEFAULT NULL,
    p_lease_ttl_s integer DEFAULT NULL,
    p_partition_key text DEFAULT NULL,
    p_producer text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    INSERT INTO __SCHEMA__.jobs (task, args, queue, priority, available_at, max_attempts,
                                 idempotency_key, dedupe_key, lock_key, timeout_s, lease_ttl_s,
                                 partition_key, producer)
    VALUES (p_task, coalesce(p_args, '{}'::jsonb), p_queue, p_priority, coalesce(p_run_at, now()),
            p_max_attempts, p_idempotency_key, p_dedupe_key, p_lock_key, p_timeout_s,
            p_lease_ttl_s, p_partition_key, p_producer)
    ON CONFLICT DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        SELECT j.id INTO new_id FROM __SCHEMA__.jobs j
        WHERE (p_idempotency_key IS NOT NULL AND j.idempotency_key = p_idempotency_key)
           OR (p_dedupe_key IS NOT NULL AND j.dedupe_key = p_dedupe_key
               AND j.status IN ('queued', 'running'))
        ORDER BY (j.idempotency_key IS NOT DISTINCT FROM p_idempotency_key) DESC
        LIMIT 1;
    END IF;
    RETURN new_id;
END;
$$;

-- start_workflow as 0024 wrote it.
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
    e_parent integer[];   -- the edges, by position in p_nodes: parent, child,
    e_child  integer[];   -- the child's requirement of it, and its gate
    e_needs  text[];
    e_gate   smallint[];
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
    -- The edges, once (job_deps' rows and each node's only child come from
    -- them), in (parent, child) order, which is job_deps' key order: ids grow
    -- with the position. A child of more than 16 parents counts them through
    -- 16 gates, its k-th parent on gate (k - 1) % 16.
    SELECT array_agg(r.parent_ord ORDER BY r.parent_ord, r.child_ord),
           array_agg(r.child_ord ORDER BY r.parent_ord, r.child_ord),
           array_agg(r.requires ORDER BY r.parent_ord, r.child_ord),
           array_agg(r.gate ORDER BY r.parent_ord, r.child_ord)
    INTO e_parent, e_child, e_needs, e_gate
    FROM (
        SELECT p.ord::int AS parent_ord, c.ord::int AS child_ord,
               coalesce(a.value ->> 'requires', 'succeeded') AS requires,
               CASE WHEN jsonb_array_length(c.v -> 'after') > 16
                    THEN ((a.ord - 1) % 16)::smallint END AS gate
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS c(v, ord)
        CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.v -> 'after', '[]'::jsonb))
            WITH ORDINALITY AS a(value, ord)
        JOIN jsonb_array_elements(p_nodes) WITH ORDINALITY AS p(v, ord)
          ON p.v ->> 'node' = a.value ->> 'node'
    ) r;

    INSERT INTO __SCHEMA__.jobs (
        id, workflow_id, node, status, pending_parents, task, queue, args, priority,
        available_at, max_attempts, timeout_s, lease_ttl_s, lock_key, partition_key, producer,
        affinity_key, only_child, only_child_gate
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
           coalesce(e.v ->> 'producer', p_producer), e.v ->> 'affinity_key',
           CASE WHEN o.children = 1 THEN ids[o.child] END,
           CASE WHEN o.children = 1 THEN o.gate END
    FROM (SELECT v, ord, jsonb_array_length(coalesce(v -> 'after', '[]'::jsonb)) AS np
          FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS x(v, ord)) e
    LEFT JOIN (SELECT u.parent, count(*) AS children, min(u.child) AS child, min(u.gate) AS gate
               FROM unnest(e_parent, e_child, e_gate) AS u(parent, child, gate)
               GROUP BY u.parent) o ON o.parent = e.ord
    ORDER BY e.ord;
    INSERT INTO __SCHEMA__.workflow_node_ids (workflow_id, node, job_id)
    SELECT wf, e.v ->> 'node', ids[e.ord]
    FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS e(v, ord);

    WITH deps AS (
        INSERT INTO __SCHEMA__.job_deps (parent_id, child_id, requires, gate)
        SELECT ids[u.parent], ids[u.child], u.requires, u.gate
        FROM unnest(e_parent, e_child, e_needs, e_gate) AS u(parent, child, requires, gate)
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

-- The row rules as 0026 wrote them.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_row_rules() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    woke boolean;  -- pg_notify's void, unused
BEGIN
    -- The wake-up (0010's jobs_notify_insert before). An assignment, not
    -- PERFORM: plpgsql evaluates it as a simple expression, where PERFORM
    -- runs a query through the executor (about 8,000 instructions a row).
    -- One CASE rather than an IF and then the call: each expression with a
    -- non-immutable function (now(), pg_notify) costs a command-counter
    -- increment and a snapshot. A rule broken below raises, and the
    -- notification goes with the failed (sub)transaction.
    IF TG_OP = 'INSERT' THEN
        woke := CASE WHEN NEW.status = 'queued' AND NEW.available_at <= now()
                     THEN pg_notify(TG_TABLE_SCHEMA || '.jobs', NEW.queue) IS NULL END;
    END IF;
    -- The common case first. plpgsql builds an expression's executable state
    -- on its first use in each transaction (a function lookup and permission
    -- check per operator), so a row whose optional columns are all NULL (the
    -- usual enqueue, claim and finish) is decided by two small expressions
    -- and never builds the one over the optional columns.
    IF coalesce(jsonb_typeof(NEW.args) = 'object', true)
       AND coalesce(NEW.attempt >= 0 AND NEW.max_attempts BETWEEN 1 AND 1000, true)
       AND coalesce(NEW.priority BETWEEN 0 AND 1000, true)
       AND coalesce(NEW.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                    AND char_length(NEW.queue) <= 64, true)
       AND coalesce(NEW.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                 'canceled', 'lost', 'skipped'), true)
       AND coalesce(NEW.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                    AND char_length(NEW.task) <= 128, true) THEN
        IF NEW.affinity_key IS NULL AND NEW.idempotency_key IS NULL AND NEW.dedupe_key IS NULL
           AND NEW.lock_key IS NULL AND NEW.partition_key IS NULL AND NEW.producer IS NULL
           AND NEW.lease_ttl_s IS NULL AND NEW.timeout_s IS NULL AND NEW.node IS NULL
           AND NEW.workflow_id IS NULL THEN
            RETURN NEW;
        END IF;
        IF coalesce(char_length(NEW.affinity_key) BETWEEN 1 AND 255, true)
           AND coalesce(char_length(NEW.idempotency_key) BETWEEN 1 AND 255
                        AND char_length(NEW.dedupe_key) BETWEEN 1 AND 255
                        AND char_length(NEW.lock_key) BETWEEN 1 AND 255
                        AND char_length(NEW.partition_key) BETWEEN 1 AND 255
                        AND char_length(NEW.producer) BETWEEN 1 AND 255, true)
           AND coalesce(NEW.lease_ttl_s IS NULL OR NEW.lease_ttl_s BETWEEN 1 AND 86400, true)
           AND coalesce(NEW.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                        AND char_length(NEW.node) <= 128, true)
           AND coalesce(NEW.timeout_s IS NULL OR NEW.timeout_s BETWEEN 1 AND 604800, true)
           AND coalesce((NEW.workflow_id IS NULL) = (NEW.node IS NULL), true) THEN
            RETURN NEW;
        END IF;
    END IF;
    -- A rule is broken: name the first, each test as the constraint of
    -- 0001/0004/0007 it replaces, in the order Postgres checked them.
    IF NOT coalesce(char_length(NEW.affinity_key) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_affinity_key_check';
    ELSIF NOT coalesce(jsonb_typeof(NEW.args) = 'object', true) THEN
        broken := 'jobs_args_object_check';
    ELSIF NOT coalesce(NEW.attempt >= 0 AND NEW.max_attempts BETWEEN 1 AND 1000, true) THEN
        broken := 'jobs_attempts_check';
    ELSIF NOT coalesce(char_length(NEW.idempotency_key) BETWEEN 1 AND 255
                       AND char_length(NEW.dedupe_key) BETWEEN 1 AND 255
                       AND char_length(NEW.lock_key) BETWEEN 1 AND 255
                       AND char_length(NEW.partition_key) BETWEEN 1 AND 255
                       AND char_length(NEW.producer) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_keys_length_check';
    ELSIF NOT coalesce(NEW.lease_ttl_s IS NULL OR NEW.lease_ttl_s BETWEEN 1 AND 86400, true) THEN
        broken := 'jobs_lease_ttl_check';
    ELSIF NOT coalesce(NEW.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.node) <= 128, true) THEN
        broken := 'jobs_node_check';
    ELSIF NOT coalesce(NEW.priority BETWEEN 0 AND 1000, true) THEN
        broken := 'jobs_priority_check';
    ELSIF NOT coalesce(NEW.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.queue) <= 64, true) THEN
        broken := 'jobs_queue_check';
    ELSIF NOT coalesce(NEW.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                    'canceled', 'lost', 'skipped'), true) THEN
        broken := 'jobs_status_check';
    ELSIF NOT coalesce(NEW.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.task) <= 128, true) THEN
        broken := 'jobs_task_check';
    ELSIF NOT coalesce(NEW.timeout_s IS NULL OR NEW.timeout_s BETWEEN 1 AND 604800, true) THEN
        broken := 'jobs_timeout_check';
    ELSIF NOT coalesce((NEW.workflow_id IS NULL) = (NEW.node IS NULL), true) THEN
        broken := 'jobs_workflow_node_check';
    ELSE
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%"', broken
        USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'jobs';
END;
$$;

ALTER TABLE __SCHEMA__.jobs
    ALTER COLUMN queue SET DEFAULT 'default',
    ALTER COLUMN priority SET DEFAULT 100,
    ALTER COLUMN max_attempts SET DEFAULT 5;
DROP FUNCTION __SCHEMA__.task_defaults_of(text);
DROP FUNCTION __SCHEMA__.builtin_task_defaults();
DROP TABLE __SCHEMA__.task_publications;
DROP TABLE __SCHEMA__.task_defaults;
