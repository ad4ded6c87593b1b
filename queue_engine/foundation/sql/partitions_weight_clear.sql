-- Remove a partition's fair-share weight in a queue (`queue-ctl partitions
-- weight QUEUE KEY --clear`): its jobs enqueued from now on have weight 1
-- again. Returns the weight removed (no row: it had none).
DELETE FROM __SCHEMA__.partition_weights w
WHERE w.queue = %(queue)s AND w.partition_key = %(partition_key)s
RETURNING w.weight
