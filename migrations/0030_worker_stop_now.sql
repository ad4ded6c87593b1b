-- queue-engine: a hard stop of a worker's running job (issue 35).
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Why. `queue-ctl stop` (migration 0004, workers.stop_requested_at) lets the
-- running job finish. An operator who must free a host now (a GPU wedged by
-- a long render, a host going down for maintenance) could only wait or kill
-- the process, which costs the job an attempt and its lease's wait.
-- `queue-ctl stop --now` sets this flag too: the worker reads it back with
-- its heartbeat, gives its running job back to the queue (attempt not
-- counted, as for a SIGTERM whose grace ran out) and exits 0, so its unit
-- leaves it stopped.
--
-- What. One boolean beside stop_requested_at; it is only ever set together
-- with it, and like it concerns one process (a restarted worker has a new row).
ALTER TABLE __SCHEMA__.workers
    ADD COLUMN stop_now boolean NOT NULL DEFAULT false;
