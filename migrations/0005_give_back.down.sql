-- Revert the give-back migration: the sweeps' shared transition function.
DROP FUNCTION IF EXISTS __SCHEMA__.give_back_jobs(bigint[], text[], text, text, text);
