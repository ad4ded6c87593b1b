-- queue-engine: fleet controls (`queue-ctl scale`, `rate`, `park`, `unpark`, `stop`)
-- and warm-state affinity. __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Like pause (0003), every control is a row or a column in the database, read by
-- the claim statement itself: it holds for every worker on every host, survives
-- restarts, and a NOTIFY on "<schema>.controls" only makes workers notice it at
-- once instead of at their next heartbeat.

-- Scale: at most scale_limit workers of the queue claim, cluster-wide. A worker
-- may claim only while it holds one of the queue's scale_limit "slots" (session
-- advisory locks, exclusive by construction) and the claim re-checks its slot
-- number against this column. NULL: no limit.
ALTER TABLE __SCHEMA__.queues
    ADD COLUMN scale_limit integer,
    -- Rate: at most rate_limit jobs started per second, cluster-wide, with bursts
    -- of at most rate_burst: a token bucket kept on this row and taken from by
    -- the claim (take_rate_tokens below). NULL: no limit.
    ADD COLUMN rate_limit double precision,
    ADD COLUMN rate_burst integer NOT NULL DEFAULT 1,
    ADD COLUMN rate_tokens double precision,
    ADD COLUMN rate_refilled_at timestamptz,
    ADD CONSTRAINT queues_scale_limit_check CHECK (scale_limit BETWEEN 0 AND 10000),
    ADD CONSTRAINT queues_rate_limit_check CHECK (rate_limit > 0 AND rate_limit <= 100000),
    ADD CONSTRAINT queues_rate_burst_check CHECK (rate_burst BETWEEN 1 AND 100000);

-- Stop: an operator asked this worker to exit (0) after its current job.
-- Warm key: the affinity key this worker is warm for (it prefers such jobs).
ALTER TABLE __SCHEMA__.workers
    ADD COLUMN stop_requested_at timestamptz,
    ADD COLUMN warm_key text;

-- Park: a parked worker stays alive and heartbeats but claims nothing. A park
-- names one worker process (worker_id; gone with its row), or a host, for one
-- queue or (queue NULL) all of them; a host park also holds for workers started
-- there later, until `queue-ctl unpark`.
CREATE TABLE __SCHEMA__.worker_parks (
    id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker_id text        REFERENCES __SCHEMA__.workers (id) ON DELETE CASCADE,
    host      text,
    queue     text,
    parked_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT worker_parks_target_check CHECK (
        (worker_id IS NOT NULL AND host IS NULL AND queue IS NULL)
        OR (worker_id IS NULL AND host IS NOT NULL)),
    CONSTRAINT worker_parks_host_check CHECK (char_length(host) BETWEEN 1 AND 255),
    CONSTRAINT worker_parks_queue_check CHECK
        (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' AND char_length(queue) <= 64)
);
CREATE UNIQUE INDEX worker_parks_worker_uidx ON __SCHEMA__.worker_parks (worker_id)
    WHERE worker_id IS NOT NULL;
CREATE UNIQUE INDEX worker_parks_host_uidx ON __SCHEMA__.worker_parks (host, coalesce(queue, ''))
    WHERE worker_id IS NULL;

-- Affinity: a job may name the warm state it needs (say, the model it loads); a
-- worker warm for that key prefers such jobs. The index serves that preference.
ALTER TABLE __SCHEMA__.jobs
    ADD COLUMN affinity_key text,
    ADD CONSTRAINT jobs_affinity_key_check CHECK (char_length(affinity_key) BETWEEN 1 AND 255);
CREATE INDEX jobs_affinity_idx ON __SCHEMA__.jobs (queue, affinity_key, priority, available_at, id)
    WHERE status = 'queued' AND affinity_key IS NOT NULL;

-- Take up to p_want start tokens from the queue's bucket; return how many were
-- granted (p_want when the queue has no rate limit, without locking anything).
-- The row lock serialises the claims of a rate-limited queue until they commit,
-- so two claims can never spend the same token. It runs in its own snapshot
-- (plpgsql, READ COMMITTED), so it always sees the latest committed bucket.
-- Time never runs backwards for the bucket: greatest() keeps refilled_at
-- monotonic even when a waiting transaction's clock read is older.
-- SECURITY DEFINER: a worker may take tokens, but cannot write the bucket (or
-- any other column of queues) itself; only roles granted EXECUTE may call it.
CREATE FUNCTION __SCHEMA__.take_rate_tokens(p_queue text, p_want integer)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q       record;
    at      timestamptz;
    tokens  double precision;
    granted integer;
BEGIN
    IF p_want <= 0 THEN
        RETURN 0;
    END IF;
    SELECT b.rate_limit, b.rate_burst, b.rate_tokens, b.rate_refilled_at INTO q
    FROM __SCHEMA__.queues b
    WHERE b.name = p_queue AND b.rate_limit IS NOT NULL
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN p_want;
    END IF;
    at := greatest(clock_timestamp(), q.rate_refilled_at);
    tokens := least(q.rate_burst::double precision,
                    coalesce(q.rate_tokens, q.rate_burst)
                    + coalesce(extract(epoch FROM at - q.rate_refilled_at), 0) * q.rate_limit);
    granted := least(p_want, floor(tokens)::integer);
    UPDATE __SCHEMA__.queues SET rate_tokens = tokens - granted, rate_refilled_at = at
    WHERE name = p_queue;
    RETURN granted;
END;
$$;
REVOKE ALL ON FUNCTION __SCHEMA__.take_rate_tokens(text, integer) FROM PUBLIC;
