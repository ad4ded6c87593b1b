-- Drop a testing-kit database, ending the sessions a test left open on it.
DROP DATABASE IF EXISTS {name} WITH (FORCE)
