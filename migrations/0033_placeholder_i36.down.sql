-- PLACEHOLDER, DROP AT MERGE (see 0033_placeholder_i36.sql).
SELECT 1;
