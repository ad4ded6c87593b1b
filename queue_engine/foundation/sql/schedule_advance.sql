-- Move a schedule's cursor: every slot up to `through` is settled.
UPDATE __SCHEMA__.schedules SET checked_until = greatest(checked_until, %(through)s)
WHERE name = %(name)s
