-- Prototype (bench/heap_layout.py --archive-after): finished jobs in a table of
-- their own. Same columns and defaults as jobs; the indexes a reader of finished
-- jobs needs (by id, by finished_at, the idempotency key). Not engine schema:
-- the design measured in bench/README.md, "Finished jobs in a table of their own".
CREATE TABLE queue_engine.jobs_archive (LIKE queue_engine.jobs INCLUDING DEFAULTS)
    WITH (fillfactor = 100);
ALTER TABLE queue_engine.jobs_archive ADD PRIMARY KEY (id);
CREATE INDEX jobs_archive_finished_at_idx ON queue_engine.jobs_archive (finished_at);
CREATE UNIQUE INDEX jobs_archive_idempotency_key_uidx ON queue_engine.jobs_archive (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
