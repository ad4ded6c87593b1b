-- queue-engine: periodic schedules (queue-scheduler) and the per-slot ledger that
-- makes every slot enqueue at most once, however many schedulers run.
-- __SCHEMA__ is replaced by the quoted engine schema name by the migration runner.

CREATE TABLE __SCHEMA__.schedules (
    name          text        PRIMARY KEY,
    expression    text        NOT NULL,
    tz            text        NOT NULL DEFAULT 'UTC',
    task          text        NOT NULL,
    queue         text        NOT NULL DEFAULT 'default',
    args          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    priority      smallint    NOT NULL DEFAULT 100,
    max_attempts  integer,
    timeout_s     integer,
    catchup       integer     NOT NULL DEFAULT 0,
    overlap       text        NOT NULL DEFAULT 'allow',
    enabled       boolean     NOT NULL DEFAULT true,
    -- 'code': declared with @periodic and synced by `queue-scheduler --app <app>`;
    -- 'cli': added with `queue-ctl schedules add`.
    source        text        NOT NULL DEFAULT 'cli',
    app           text,
    -- Every slot at or before this instant is settled (enqueued, skipped, or before
    -- the schedule existed / was enabled / was last changed): a scheduler only ever
    -- considers slots after it, so it is the cursor shared by all schedulers.
    checked_until timestamptz NOT NULL DEFAULT now(),
    last_slot     timestamptz,
    last_job_id   bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT schedules_name_check CHECK
        (name ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$' AND char_length(name) <= 128),
    CONSTRAINT schedules_task_check CHECK
        (task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$' AND char_length(task) <= 128),
    CONSTRAINT schedules_queue_check CHECK
        (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' AND char_length(queue) <= 64),
    CONSTRAINT schedules_args_object_check CHECK (jsonb_typeof(args) = 'object'),
    CONSTRAINT schedules_priority_check CHECK (priority BETWEEN 0 AND 1000),
    CONSTRAINT schedules_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT schedules_timeout_check CHECK (timeout_s BETWEEN 1 AND 604800),
    CONSTRAINT schedules_catchup_check CHECK (catchup BETWEEN 0 AND 1000),
    CONSTRAINT schedules_overlap_check CHECK (overlap IN ('allow', 'skip')),
    CONSTRAINT schedules_source_check CHECK (source IN ('code', 'cli'))
);

-- One row per slot a scheduler acted on. The primary key is the exactly-once
-- guarantee: the row and the slot's job are inserted in one transaction, so a
-- second scheduler racing the same slot conflicts and enqueues nothing.
CREATE TABLE __SCHEMA__.schedule_runs (
    schedule     text        NOT NULL
        REFERENCES __SCHEMA__.schedules (name) ON DELETE CASCADE ON UPDATE CASCADE,
    slot         timestamptz NOT NULL,
    outcome      text        NOT NULL,
    job_id       bigint,
    scheduler_id text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, slot),
    CONSTRAINT schedule_runs_outcome_check CHECK (outcome IN ('enqueued', 'skipped'))
) WITH (autovacuum_vacuum_insert_scale_factor = 0.05);
-- Pruning by age.
CREATE INDEX schedule_runs_slot_idx ON __SCHEMA__.schedule_runs (slot);
