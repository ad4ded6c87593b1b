-- Revert the fleet controls migration: scale and rate limits, parks, stop
-- requests and affinity keys are dropped with their columns and table.
DROP FUNCTION IF EXISTS __SCHEMA__.take_rate_tokens(text, integer);
DROP INDEX IF EXISTS __SCHEMA__.jobs_affinity_idx;
ALTER TABLE __SCHEMA__.jobs DROP COLUMN IF EXISTS affinity_key;
DROP TABLE IF EXISTS __SCHEMA__.worker_parks;
ALTER TABLE __SCHEMA__.workers
    DROP COLUMN IF EXISTS stop_requested_at,
    DROP COLUMN IF EXISTS warm_key;
ALTER TABLE __SCHEMA__.queues
    DROP CONSTRAINT IF EXISTS queues_scale_limit_check,
    DROP CONSTRAINT IF EXISTS queues_rate_limit_check,
    DROP CONSTRAINT IF EXISTS queues_rate_burst_check,
    DROP COLUMN IF EXISTS scale_limit,
    DROP COLUMN IF EXISTS rate_limit,
    DROP COLUMN IF EXISTS rate_burst,
    DROP COLUMN IF EXISTS rate_tokens,
    DROP COLUMN IF EXISTS rate_refilled_at;
