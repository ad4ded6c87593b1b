SELECT coalesce(max(version), 0) FROM {ledger}
