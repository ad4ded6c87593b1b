-- Remove a schedule (its slot ledger goes with it).
DELETE FROM __SCHEMA__.schedules WHERE name = %(name)s RETURNING name, source
