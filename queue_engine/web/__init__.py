"""``queue-web``: the HTTP API and the dashboard (``pip install 'queue-engine[web]'``).

A top layer, like the command line: it imports the core and nothing below
imports it (``tests/unit/test_layers.py``).
"""

from __future__ import annotations
