-- queue-engine: per-queue operator controls (`queue-ctl pause` / `resume`).
-- __SCHEMA__ is replaced by the quoted engine schema name by the migration runner.
--
-- One row per queue an operator has touched; a queue without a row has the
-- defaults (not paused). The claim statement reads this table by primary key
-- once per statement, so a control takes effect at the next claim of every
-- worker and survives restarts of workers and of Postgres. Later controls
-- (scale limit, rate limit) become columns of this table.

CREATE TABLE __SCHEMA__.queues (
    name       text        PRIMARY KEY,
    -- Paused: workers of the queue claim nothing; running jobs finish normally.
    paused     boolean     NOT NULL DEFAULT false,
    paused_at  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- Same rule as jobs.queue (queue_engine/validation.py).
    CONSTRAINT queues_name_check CHECK
        (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' AND char_length(name) <= 64),
    CONSTRAINT queues_paused_at_check CHECK (paused = (paused_at IS NOT NULL))
);
