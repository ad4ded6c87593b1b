-- Does this session still hold the leader lock? A bigint advisory key shows in
-- pg_locks as classid (high 32 bits) and objid (low 32 bits) with objsubid 1.
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory'
      AND pid = pg_backend_pid()
      AND granted
      AND objsubid = 1
      AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%(key)s, 0)
)
