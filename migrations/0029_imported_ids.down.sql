-- queue-engine: undo 0029_imported_ids. The imported jobs stay; only the map
-- from their old ids is dropped.
DROP TABLE __SCHEMA__.imported_ids;
