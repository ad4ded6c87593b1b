-- Reverses 0001_initial. The ledger table belongs to the runner and stays.
DROP FUNCTION IF EXISTS __SCHEMA__.enqueue(text, jsonb, text, integer, timestamptz, integer, text, text, text, integer, integer, text, text);
DROP TABLE IF EXISTS __SCHEMA__.workers;
DROP TABLE IF EXISTS __SCHEMA__.job_events;
DROP TABLE IF EXISTS __SCHEMA__.jobs;
DROP FUNCTION IF EXISTS __SCHEMA__.jobs_notify_insert();
DROP FUNCTION IF EXISTS __SCHEMA__.jobs_guard_transition();
DROP TABLE IF EXISTS __SCHEMA__.job_transitions;
