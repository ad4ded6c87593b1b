-- Record one operator control (queue_engine/operator/audit.py, migration 0034):
-- what was done (%(control)s) to what (%(target)s), the state before and
-- after as JSON, who did it and through what. Run inside the control's own
-- transaction, so the row commits with the change or not at all.
INSERT INTO __SCHEMA__.control_events (control, target, before, after, actor, via)
VALUES (%(control)s, %(target)s, %(before)s::jsonb, %(after)s::jsonb, %(actor)s, %(via)s)
RETURNING id, at
