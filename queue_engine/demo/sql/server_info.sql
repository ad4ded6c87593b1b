-- The server facts that decide what a benchmark measures: version and durability.
SELECT current_setting('server_version'), current_setting('fsync'),
       current_setting('synchronous_commit')
