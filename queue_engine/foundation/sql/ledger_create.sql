CREATE SCHEMA IF NOT EXISTS {ledger_schema};
CREATE TABLE IF NOT EXISTS {ledger} (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
