-- Code sync: remove the schedules an app declared before but declares no more.
DELETE FROM __SCHEMA__.schedules
WHERE source = 'code' AND app = %(app)s AND NOT (name = ANY(%(names)s::text[]))
RETURNING name
