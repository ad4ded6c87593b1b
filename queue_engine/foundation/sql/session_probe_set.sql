-- Pooler check (queue_engine/daemon/pooler.py): mark this session with a token, for
-- the rest of the session (is_local false). A custom setting: no table, no lock.
SELECT set_config('queue_engine.session_probe', %(token)s, false)
