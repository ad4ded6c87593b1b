-- Clear a concurrency key's rate (`queue-ctl limits clear KEY`, also with
-- --rate-only): its jobs start as fast as workers take them (within its
-- concurrency limit, if any). Returns the rate and burst it removed; no row
-- when the key had none.
DELETE FROM __SCHEMA__.rate_buckets b
WHERE b.key = %(key)s
RETURNING b.rate, b.burst
