-- Revert the schedules migration: drop the slot ledger, then the schedules.
DROP TABLE IF EXISTS __SCHEMA__.schedule_runs;
DROP TABLE IF EXISTS __SCHEMA__.schedules;
