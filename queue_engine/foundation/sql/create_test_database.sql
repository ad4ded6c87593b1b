-- The testing kit's per-test database: a copy of the migrated template, made in
-- milliseconds (a file copy, no WAL-logged block copy). Identifiers are composed
-- with psycopg.sql.Identifier; CREATE DATABASE takes no parameters.
CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY
