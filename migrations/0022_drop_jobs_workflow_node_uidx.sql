-- queue-engine: jobs no longer carries an index of node names (migration 0021
-- moved them to workflow_node_ids). __SCHEMA__ is replaced by the quoted engine
-- schema name. Every row version of a node took an entry in it: 46,000
-- instructions of a fan part's statement, 21,000 of each child's release.
-- Online-safety: DROP INDEX takes a brief ACCESS EXCLUSIVE lock on jobs (no
-- scan); alone in its migration, so no other table is locked with it.
DROP INDEX __SCHEMA__.jobs_workflow_node_uidx;
