DELETE FROM {ledger} WHERE version = %(version)s
