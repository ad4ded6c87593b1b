-- Enable or disable a schedule. Enabling restarts the cursor at now, so the slots
-- that passed while it was disabled are not "missed" (nor caught up).
UPDATE __SCHEMA__.schedules SET
    enabled = %(enabled)s,
    checked_until = CASE WHEN %(enabled)s AND NOT enabled
                         THEN greatest(checked_until, now()) ELSE checked_until END,
    updated_at = now()
WHERE name = %(name)s
RETURNING name, source
