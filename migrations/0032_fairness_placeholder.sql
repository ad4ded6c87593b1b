-- queue-engine: PLACEHOLDER for issue 36 §2 (fairness), which owns 0032.
-- It exists only so that the rate-limit branch (0033) has a chain without a
-- gap; the lead replaces it with the fairness migration at merge. No-op.
SELECT 1;
