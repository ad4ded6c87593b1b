INSERT INTO {ledger} (version, name, checksum) VALUES (%(version)s, %(name)s, %(checksum)s)
