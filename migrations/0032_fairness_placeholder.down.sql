-- queue-engine: undo the 0032 placeholder (a no-op).
SELECT 1;
