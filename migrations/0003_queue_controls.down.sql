-- Revert the queue controls migration: every queue is unpaused with the table.
DROP TABLE IF EXISTS __SCHEMA__.queues;
