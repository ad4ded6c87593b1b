-- queue-engine: undo 0034_control_events. The audit of controls is dropped
-- (the controls themselves are untouched).
DROP TABLE __SCHEMA__.control_events;
