-- queue-engine: undo 0030_worker_stop_now. Pending hard stops become plain
-- stops (stop_requested_at stays): the workers finish their current job.
ALTER TABLE __SCHEMA__.workers DROP COLUMN stop_now;
