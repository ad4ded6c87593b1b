"""Compatibility faces of ``queue-web``: other systems' HTTP contracts, served unchanged.

``queue-web --compat dataloader`` (:mod:`queue_engine.web.compat.dataloader`)
answers dataloader's HTTP API v1 for its clients; without the switch the
native API keeps its own conventions (201, 422, integer ids).
"""
