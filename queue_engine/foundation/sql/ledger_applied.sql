SELECT version, name, checksum, applied_at FROM {ledger} ORDER BY version
