"""CORS with llama-server's flags (``--cors-origins``, ``--cors-methods``,
``--cors-headers``, ``--cors-credentials``), as pure ASGI middleware.

Unlike llama-server, CORS is off unless ``--cors-origins`` is given, and ``*`` is sent as
``*`` (never the caller's Origin echoed back with credentials: any web page could then
use the server with the visitor's cookies). ``localhost`` is llama-server's special value:
any http(s) origin on localhost, 127.0.0.1 or [::1], on any port, is reflected. A
preflight from an origin not allowed gets 200 without ``Access-Control-Allow-Origin``, as
llama-server answers, so the browser refuses it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = ["CorsMiddleware", "is_localhost"]

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def is_localhost(origin: str) -> bool:
    try:
        parts = urlsplit(origin)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host in _LOCAL_HOSTS


class CorsMiddleware:
    def __init__(
        self,
        app: Any,
        origins: list[str],
        methods: str = "GET, POST, DELETE, OPTIONS",
        headers: str = "*",
        credentials: bool = True,
    ) -> None:
        self.app = app
        self.origins = frozenset(origins)
        self.methods = methods.encode()
        self.headers = headers.encode()
        self.credentials = credentials

    def _allow(self, origin: str) -> str | None:
        if origin in self.origins or ("localhost" in self.origins and is_localhost(origin)):
            return origin
        return "*" if "*" in self.origins else None

    def _headers(self, allowed: str | None) -> list[tuple[bytes, bytes]]:
        if allowed is None:
            return []
        # llama-server's capitalization: names are case-insensitive in HTTP, but clients that
        # copy headers into a plain dict (llama.cpp's own tests do) look them up verbatim
        out = [(b"Access-Control-Allow-Origin", allowed.encode("latin-1"))]
        if allowed != "*":
            out.append((b"Vary", b"Origin"))
            if self.credentials:
                out.append((b"Access-Control-Allow-Credentials", b"true"))
        return out

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_headers = dict(scope.get("headers", []))
        origin = request_headers.get(b"origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        allowed = self._allow(origin.decode("latin-1"))
        extra = self._headers(allowed)
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in request_headers:
            headers = [
                *extra,
                (b"Access-Control-Allow-Methods", self.methods),
                (b"Access-Control-Allow-Headers", self.headers),
                (b"content-length", b"0"),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return

        async def with_cors(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and extra:
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_cors)
