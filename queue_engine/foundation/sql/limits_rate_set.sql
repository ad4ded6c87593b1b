-- Set a concurrency key's rate (`queue-ctl limits set KEY --rate R --burst B`):
-- its jobs start at most %(rate)s a second on average, at most %(burst)s at
-- once, cluster-wide (migration 0033). A new bucket starts full. A changed one
-- is first refilled at its old rate up to now, then capped at the new burst,
-- so the change neither grants nor forfeits tokens already earned. The claim
-- reads the bucket on its next run: no worker needs a NOTIFY. previous_rate,
-- previous_burst: what it replaces (NULL: the key had no rate).
WITH prev AS (
    SELECT b.rate, b.burst FROM __SCHEMA__.rate_buckets b WHERE b.key = %(key)s
),
up AS (
    INSERT INTO __SCHEMA__.rate_buckets AS b (key, rate, burst, tokens)
    VALUES (%(key)s, %(rate)s, %(burst)s, %(burst)s)
    ON CONFLICT (key) DO UPDATE SET
        rate = EXCLUDED.rate,
        burst = EXCLUDED.burst,
        tokens = least(EXCLUDED.burst::double precision, b.burst::double precision,
                       b.tokens + b.rate * extract(epoch FROM clock_timestamp() - b.refilled_at)),
        refilled_at = clock_timestamp(),
        set_at = now()
    RETURNING b.key
)
SELECT (SELECT p.rate FROM prev p) AS previous_rate,
       (SELECT p.burst FROM prev p) AS previous_burst,
       (SELECT count(*) FROM up) AS written
