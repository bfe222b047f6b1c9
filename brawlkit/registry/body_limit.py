"""The request size limits as ASGI middleware: the head (:data:`MAX_HEAD_BYTES`,
16 KiB) and the body (``--max-upload-mb``).

Why middleware and not a check in the upload route: the limits must hold for every
request (a megabytes-long JSON batch of matches too) and must stop a body while it
streams in, before anything parses or buffers it.

Why the head here too: uvicorn's h11 parser bounds only a head that arrives in
pieces (``h11_max_incomplete_event_size``, set to the same 16 KiB by ``registry
serve``); a head of 60 KB sent in one write was parsed whole and answered 200.  So the
parsed head — request line and headers, counted as HTTP/1.1 writes them — is measured
before any route runs, and a head over the limit is answered 400 and the connection
closed.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brawlkit.registry.deps import http_error
from brawlkit.registry.limits import MAX_HEAD_BYTES


def head_size(scope: Scope) -> int:
    """The bytes of a request's head as HTTP/1.1 writes it: ``METHOD target
    HTTP/1.1\\r\\n``, ``name: value\\r\\n`` per header, and the blank line."""
    target = len(scope.get("raw_path") or scope.get("path", "").encode())
    query = scope.get("query_string") or b""
    line = len(scope.get("method", "")) + 1 + target + (1 + len(query) if query else 0) \
        + 1 + len("HTTP/") + len(scope.get("http_version", "1.1")) + 2
    return line + sum(len(k) + 2 + len(v) + 2 for k, v in scope.get("headers", [])) + 2


class BodyLimit:
    """ASGI middleware: refuse a request head over ``head_limit`` bytes with 400 (and
    close the connection), and a body larger than ``limit`` bytes with 413 — at once
    when ``Content-Length`` says so, otherwise as soon as the streamed bytes pass it
    (chunked bodies), never after buffering the whole body."""

    def __init__(self, app: ASGIApp, limit: int, head_limit: int = MAX_HEAD_BYTES) -> None:
        self.app = app
        self.limit = limit
        self.head_limit = head_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = head_size(scope)
        if head > self.head_limit:
            await JSONResponse(
                {"detail": f"request head (request line and headers) of {head} bytes is over "
                           f"the limit of {self.head_limit} bytes: send less in headers and "
                           "the URL"},
                status_code=400, headers={"Connection": "close"})(scope, receive, send)
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
