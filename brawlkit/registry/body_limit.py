"""The request-body size limit (``--max-upload-mb``) as ASGI middleware.

Why middleware and not a check in the upload route: the limit must hold for every
request (a megabytes-long JSON batch of matches too) and must stop a body while it
streams in, before anything parses or buffers it.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brawlkit.registry.deps import http_error


class BodyLimit:
    """ASGI middleware: refuse a request body larger than ``limit`` bytes with 413 —
    at once when ``Content-Length`` says so, otherwise as soon as the streamed bytes
    pass it (chunked bodies), never after buffering the whole body."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0:
                    await JSONResponse({"detail": "invalid Content-Length"},
                                       status_code=400)(scope, receive, send)
                    return
                if declared > self.limit:
                    await JSONResponse(
                        {"detail": f"request body of {declared} bytes is over the limit of "
                                   f"{self.limit} bytes (--max-upload-mb)"},
                        status_code=413)(scope, receive, send)
                    return
        seen = 0
        limit = self.limit

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise http_error(413, f"request body over the limit of {limit} bytes "
                                          "(--max-upload-mb)")
            return message

        await self.app(scope, limited, send)
