-- The audit of operator controls, newest first (`queue-ctl audit`,
-- GET /api/v1/audit, the dashboard's "Recent changes"): rows at or after
-- %(since)s (NULL: all), of one control and one target when given, at most
-- %(limit)s. Walks control_events_at_idx backwards; the filters are checks on
-- the rows it walks (the table is small: pruned after 90 days by default).
SELECT e.id, e.at, e.control, e.target, e.before, e.after, e.actor, e.via
FROM __SCHEMA__.control_events e
WHERE (%(since)s::timestamptz IS NULL OR e.at >= %(since)s::timestamptz)
  AND (%(control)s::text IS NULL OR e.control = %(control)s::text)
  AND (%(target)s::text IS NULL OR e.target = %(target)s::text)
ORDER BY e.at DESC, e.id DESC
LIMIT %(limit)s
