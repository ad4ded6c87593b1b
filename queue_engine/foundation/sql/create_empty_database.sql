-- The testing kit's template database, before the engine schema is migrated into it.
CREATE DATABASE {name}
