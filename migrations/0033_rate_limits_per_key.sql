-- queue-engine: per-key rate limits enforced by the claim (issue 36, §3).
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Why. A partner API allows R calls a second per account: the jobs that call
-- it must start at most that fast, fleet-wide, however many workers and hosts
-- drain the backlog, and a job over the rate must wait (stay queued) rather
-- than fail or be churned. The design is docs/internals/flow-control.md, §3.
--
-- What.
-- - jobs.weight (and jobs_archive.weight, jobs_all recreated as 0031 did): the
--   tokens a job takes from its key's bucket, NULL meaning 1. A nullable
--   column without a default rewrites nothing; plain jobs leave it NULL.
-- - rate_buckets: one token bucket per concurrency key that an operator rated
--   (`queue-ctl limits set KEY --rate 20/s --burst 20`). Tokens refill lazily:
--   the bucket holds the tokens at refilled_at, and the tokens now are
--   least(burst, tokens + rate * seconds since), computed when read.
-- - concurrency_free(key, limit, weight): 0031's function with the bucket:
--   how many more jobs of the key may start now, under the key's advisory
--   transaction lock. It only *reads* the bucket: a job it admits may still
--   not be claimed (the batch's ranking, the queue's rate, a row another
--   worker locked), so it cannot know what to take.
-- - rate_buckets_spend(key, weight), called by the status guard
--   (jobs_guard_transition, redefined here with 0020's rules) for a keyed job
--   going queued -> running: it takes the job's weight from its key's bucket,
--   in the claiming transaction, exactly once per job actually claimed, while
--   the claim still holds the key's lock.
ALTER TABLE __SCHEMA__.jobs ADD COLUMN weight integer;
ALTER TABLE __SCHEMA__.jobs_archive ADD COLUMN weight integer;
CREATE OR REPLACE VIEW __SCHEMA__.jobs_all AS
    SELECT * FROM __SCHEMA__.jobs
    UNION ALL
    SELECT * FROM __SCHEMA__.jobs_archive;

-- tokens may go below 0: a batch that admits several jobs of one key with
-- different weights may take more than the bucket held, and a job heavier
-- than the burst starts from a full bucket; the debt is repaid by the refill
-- before the key's next job starts, so the rate over time holds.
CREATE TABLE __SCHEMA__.rate_buckets (
    key         text             PRIMARY KEY,
    rate        double precision NOT NULL,
    burst       integer          NOT NULL,
    tokens      double precision NOT NULL,
    refilled_at timestamptz      NOT NULL DEFAULT clock_timestamp(),
    set_at      timestamptz      NOT NULL DEFAULT now(),
    CONSTRAINT rate_buckets_key_check CHECK (char_length(key) BETWEEN 1 AND 255),
    CONSTRAINT rate_buckets_rate_check CHECK (rate > 0 AND rate <= 100000),
    CONSTRAINT rate_buckets_burst_check CHECK (burst BETWEEN 1 AND 100000)
);

-- How many more jobs of p_key may start now (NULL: the key has no limit and
-- no rate), for a candidate job whose own limit is p_limit and whose weight is
-- p_weight (NULL: 1). 0031's two-argument form stays for its callers; the
-- claim calls this one.
--
-- Concurrency: as 0031 (the operator's limit, else the job's; the key's
-- running rows counted after the try-lock, with a fresh snapshot).
-- Rate: the bucket read after the lock, so it shows every claim of the key
-- that committed before (each takes its tokens in the same transaction,
-- rate_buckets_spend below). The job fits when the bucket holds its weight
-- (a job heavier than the burst: a full bucket); the answer is then at most
-- the number of such jobs the tokens pay for, which the batch claim's
-- ranking (pick) uses as the key's free slots.
--
-- A key's jobs take their tokens in the claim's order: once a job of the key
-- did not fit, the key's later jobs get 0 for the rest of the transaction (a
-- transaction-local setting marks the key), so lighter jobs behind a heavy one
-- cannot take each token as it comes and starve it. Each claim scans from the
-- queue's head, so the key's first due job is always the one that waits.
--
-- A job that does not fit is skipped (0), and the function tells the worker
-- when the token it lacks is due: a NOTICE "queue-engine rate due S" (S
-- seconds from now; 0 when another claim of the key holds its lock). The
-- worker, whose claim then came back empty, sleeps that long instead of
-- polling (worker/ratewait.py). A notice costs no round trip and nothing to a
-- plain job (the function is never called for it).
CREATE FUNCTION __SCHEMA__.concurrency_free(p_key text, p_limit integer, p_weight integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    -- A transaction-local setting named by this schema (two engine schemas in
    -- one database never share it): hashtext and to_hex of a constant are
    -- folded when the function is planned, so naming it costs nothing a call.
    memo    text := 'queue_engine_flow.skip_' || to_hex(hashtext('__SCHEMA__'));
    skipped text;
    seen    text[] := '{}';
    entry   text;
    op      integer;
    lim     integer;
    running bigint;
    free    integer;
    rate    double precision;
    burst   integer;
    have    double precision;
    need    double precision;
BEGIN
    -- A key (or, for a job's own limit, the key at that limit) this
    -- transaction already found full, locked by another claim or out of
    -- tokens: its later jobs are skipped at once. A claim walking many jobs
    -- of a full key pays a setting's lookup for each, not a count.
    skipped := current_setting(memo, true);
    IF skipped IS NOT NULL AND skipped <> '' THEN
        seen := skipped::text[];
        IF ('*' || p_key) = ANY (seen) OR (p_limit::text || ':' || p_key) = ANY (seen) THEN
            RETURN 0;
        END IF;
    END IF;
    -- A job without a limit of its own: the key may have none at all (then
    -- nothing is locked). A job with one takes the lock first.
    -- A job without a limit of its own: the key may have none at all (then
    -- nothing is locked). A job with one takes the lock first, so a key
    -- another claim holds costs a try-lock and nothing else.
    IF p_limit IS NULL THEN
        SELECT c.max_running INTO op FROM __SCHEMA__.concurrency_limits c WHERE c.key = p_key;
        IF op IS NULL AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.rate_buckets r
                                      WHERE r.key = p_key) THEN
            RETURN NULL;
        END IF;
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('__SCHEMA__.concurrency_limits'), hashtext(p_key)) THEN
        -- Another claim of the key is in flight: skip its jobs now, and have
        -- the worker look again soon (that claim may leave a slot or a token).
        RAISE NOTICE 'queue-engine rate due 0';
        entry := '*' || p_key;
    ELSE
        -- After the lock, each query with a fresh snapshot (a VOLATILE
        -- function's): every claim of the key committed before is counted.
        -- Three small queries: one query joining them cost more to set up.
        IF p_limit IS NOT NULL THEN
            SELECT c.max_running INTO op FROM __SCHEMA__.concurrency_limits c
            WHERE c.key = p_key;
        END IF;
        lim := coalesce(op, p_limit);
        IF lim IS NOT NULL THEN
            IF lim > 0 THEN
                SELECT count(*) INTO running FROM __SCHEMA__.jobs r
                WHERE r.concurrency_key = p_key AND r.status = 'running';
            END IF;
            free := greatest(lim - coalesce(running, 0), 0);
            IF free = 0 THEN
                entry := CASE WHEN op IS NOT NULL THEN '*' || p_key
                              ELSE p_limit::text || ':' || p_key END;
            END IF;
        END IF;
        IF entry IS NULL THEN
            SELECT r.rate, r.burst,
                   least(r.burst::double precision,
                         r.tokens + r.rate * extract(epoch FROM clock_timestamp() - r.refilled_at))
              INTO rate, burst, have
              FROM __SCHEMA__.rate_buckets r WHERE r.key = p_key;
            IF rate IS NOT NULL THEN
                need := least(greatest(coalesce(p_weight, 1), 1), burst)::double precision;
                IF have < need THEN
                    RAISE NOTICE 'queue-engine rate due %',
                        round(((need - have) / rate)::numeric, 6);
                    entry := '*' || p_key;
                ELSE
                    free := least(coalesce(free, 2147483647),
                                  greatest(floor(have / greatest(coalesce(p_weight, 1), 1)),
                                           1)::integer);
                END IF;
            END IF;
        END IF;
    END IF;
    IF entry IS NULL THEN
        RETURN free;
    END IF;
    -- Remember it for the rest of the transaction (at most 32 entries: past
    -- that, a key is looked at again, which is only slower).
    IF cardinality(seen) < 32 THEN
        PERFORM set_config(memo, (seen || entry)::text, true);
    END IF;
    RETURN 0;
END;
$$;

REVOKE ALL ON FUNCTION __SCHEMA__.concurrency_free(text, integer, integer) FROM PUBLIC;

-- Take a claimed job's tokens from its key's bucket (none: the key is not
-- rated, a primary-key probe that finds nothing). Refill, then subtract: the
-- bucket may go below 0 (see the table's comment), never above its burst.
-- SECURITY DEFINER: a worker may take tokens but not write the bucket itself.
CREATE FUNCTION __SCHEMA__.rate_buckets_spend(p_key text, p_weight integer)
RETURNS void
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE __SCHEMA__.rate_buckets r SET
        tokens = least(r.burst::double precision,
                       r.tokens + r.rate * extract(epoch FROM clock_timestamp() - r.refilled_at))
                 - greatest(coalesce(p_weight, 1), 1),
        refilled_at = clock_timestamp()
    WHERE r.key = p_key;
$$;

REVOKE ALL ON FUNCTION __SCHEMA__.rate_buckets_spend(text, integer) FROM PUBLIC;

-- Where the spend runs: in the guard that every status change of a job
-- already goes through (BEFORE UPDATE OF status, attempt; 0020's body, same
-- rules, same errors), on its fast path, after the transition is known valid:
-- a keyed job going queued -> running takes its weight from its key's bucket,
-- in the claiming transaction, while the claim still holds the key's lock. A
-- plain job's claim or finish pays one NULL test in a function it already
-- runs. Not a trigger of its own: an AFTER UPDATE OF status trigger with a
-- WHEN on the key cost every plain claim-and-finish statement 74,000 server
-- instructions (6 %, bench/statement_cost.py), preparing its WHEN and the
-- after-trigger queue on every execution.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.attempt >= 0 AND (
       OLD.status = NEW.status
       OR (OLD.status = 'queued' AND NEW.status = 'running')
       OR (OLD.status = 'running' AND NEW.status = 'queued')
       OR (OLD.status = 'running'
           AND NEW.status IN ('succeeded', 'failed', 'canceled', 'skipped')
           AND (NEW.workflow_id IS NULL
                OR (NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL)))
       OR (OLD.status = 'waiting' AND NEW.status IN ('running', 'queued'))) THEN
        IF NEW.concurrency_key IS NULL THEN
            RETURN NEW;
        END IF;
        IF OLD.status = 'queued' AND NEW.status = 'running' THEN
            PERFORM __SCHEMA__.rate_buckets_spend(NEW.concurrency_key, NEW.weight);
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.attempt < 0 THEN
        RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%"',
                        'jobs_attempts_check'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'jobs_attempts_check',
                  TABLE = 'jobs';
    END IF;
    IF OLD.status <> NEW.status AND NOT EXISTS (
        SELECT 1 FROM __SCHEMA__.job_transitions t
        WHERE t.from_status = OLD.status AND t.to_status = NEW.status
    ) THEN
        RAISE EXCEPTION 'queue-engine: job % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.workflow_id IS NOT NULL AND OLD.status <> NEW.status THEN
        IF NEW.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND OLD.status NOT IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND NOT (NEW.finished_at IS NOT NULL AND OLD.finished_at IS NULL) THEN
            RAISE EXCEPTION 'queue-engine: workflow node job % cannot go from % to % without setting finished_at',
                            OLD.id, OLD.status, NEW.status
                USING ERRCODE = 'check_violation',
                      HINT = 'A node''s end sets finished_at, which was NULL (e.g. finished_at = now()).';
        END IF;
        IF OLD.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND NEW.status NOT IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
           AND NOT (NEW.finished_at IS NULL AND OLD.finished_at IS NOT NULL) THEN
            RAISE EXCEPTION 'queue-engine: workflow node job % cannot go from % to % without clearing finished_at',
                            OLD.id, OLD.status, NEW.status
                USING ERRCODE = 'check_violation',
                      HINT = 'A node leaving an end clears finished_at (finished_at = NULL).';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

-- Grants as 0031's: readers of jobs read the buckets; updaters of jobs (the
-- worker) may call the claim's function.
DO $grants$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.jobs'::regclass
          AND a.privilege_type = 'SELECT' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT ON __SCHEMA__.rate_buckets TO %s', grantee);
        EXECUTE format('GRANT SELECT ON __SCHEMA__.jobs_all TO %s', grantee);
    END LOOP;
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.jobs'::regclass
          AND a.privilege_type = 'UPDATE' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format(
            'GRANT EXECUTE ON FUNCTION __SCHEMA__.concurrency_free(text, integer, integer) TO %s',
            grantee);
        EXECUTE format(
            'GRANT EXECUTE ON FUNCTION __SCHEMA__.rate_buckets_spend(text, integer) TO %s',
            grantee);
    END LOOP;
END
$grants$;
