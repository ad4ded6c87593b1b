-- PLACEHOLDER, DROP AT MERGE: keeps the chain gapless on branch i36-audit until
-- the real 0032 migration (fairness (i36-fair)) takes this number.
SELECT 1;
