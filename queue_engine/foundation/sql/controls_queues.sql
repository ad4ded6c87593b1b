-- Queue controls in force, for `queue-ctl controls`: every queue that is paused,
-- scale limited or rate limited (a row left at its defaults is not listed).
-- rate_burst only means something with a rate limit, so it is NULL without one.
SELECT q.name AS queue, q.paused, q.paused_at, q.scale_limit, q.rate_limit,
       CASE WHEN q.rate_limit IS NOT NULL THEN q.rate_burst END AS rate_burst,
       q.updated_at
FROM __SCHEMA__.queues q
WHERE q.paused OR q.scale_limit IS NOT NULL OR q.rate_limit IS NOT NULL
ORDER BY q.name
