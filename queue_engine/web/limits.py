"""A cap on request bodies: a huge body is refused (413) before it fills memory.

FastAPI reads a JSON body whole before a route's dependencies run, so
without a cap anyone who can reach the port (credential or not) could make
the process buffer any amount. The largest legitimate body is a batch
create (at most 10,000 jobs); :data:`MAX_BODY_BYTES` leaves room for it.
Bodies announced with ``Content-Length`` are refused at once; chunked
bodies are read here, counted, and refused when they pass the cap.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from queue_engine.web.problems import problem

#: The largest request body accepted (bytes).
MAX_BODY_BYTES = 32 * 1024 * 1024


class BodyLimit:
    """ASGI middleware enforcing :data:`MAX_BODY_BYTES` (or ``max_bytes``)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an announced oversize body; count a chunked one as it is read."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        announced = dict(scope["headers"]).get(b"content-length")
        if announced is not None and announced.isdigit() and int(announced) > self.max_bytes:
            await problem(413, self.detail())(scope, receive, send)
            return
        if announced is not None:
            await self.app(scope, receive, send)  # the server stops at Content-Length
            return
        # Chunked: read it here, counting, and hand the app what was read. A
        # refusal must be sent from here: FastAPI turns an error raised while
        # it parses a body into a generic 400.
        messages: list[Message] = []
        seen = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                await problem(413, self.detail())(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replay = iter(messages)

        async def replayed() -> Message:
            return next(replay, None) or await receive()

        await self.app(scope, replayed, send)

    def detail(self) -> str:
        """The refusal's sentence."""
        return f"request body over {self.max_bytes} bytes"
