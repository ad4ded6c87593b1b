-- Pooler check (queue_engine/daemon/pooler.py): the token this server session carries,
-- NULL (missing_ok) when none was set on it.
SELECT current_setting('queue_engine.session_probe', true) AS token
