-- Give an input node its value (migration 0007's provide_input): one word back,
-- provided | already | not_ready | not_input | not_found.
SELECT __SCHEMA__.provide_input(%(id)s::bigint, %(node)s, %(value)s::jsonb) AS outcome
