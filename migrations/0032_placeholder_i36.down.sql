-- PLACEHOLDER, DROP AT MERGE (see 0032_placeholder_i36.sql).
SELECT 1;
