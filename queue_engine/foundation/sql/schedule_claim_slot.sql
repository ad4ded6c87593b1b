-- Claim one slot of one schedule. No row back: another scheduler already acted on
-- this slot (the primary key is the exactly-once guarantee).
INSERT INTO __SCHEMA__.schedule_runs (schedule, slot, outcome, scheduler_id)
VALUES (%(name)s, %(slot)s, %(outcome)s, %(scheduler_id)s)
ON CONFLICT (schedule, slot) DO NOTHING
RETURNING slot
