-- PLACEHOLDER, DROP AT MERGE: keeps the chain gapless on branch i36-audit until
-- the real 0033 migration (per-key rate limits (i36-rate)) takes this number.
SELECT 1;
