"""The dashboard; built by web-ui."""

from __future__ import annotations

from fastapi import FastAPI


def mount_pages(app: FastAPI) -> None:
    """The dashboard; built by web-ui.

    Called once by :func:`queue_engine.web.app.create_app` after the API is
    mounted. Pages depend on :func:`queue_engine.web.auth.require_scope` and
    borrow connections through ``app.state.web`` (:class:`~queue_engine.web.state.WebState`).
    """
