"""Console scripts: one module per command (``queue-ctl`` lives in :mod:`.ctl`)."""
