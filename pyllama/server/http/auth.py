"""API keys (``Authorization: Bearer`` or ``X-Api-Key``) and the request body bound, as
pure ASGI middleware so streaming responses pass through untouched."""

from __future__ import annotations

import hmac
from typing import Any

from pyllama.server.http.errors import error_response

__all__ = ["PUBLIC_PATHS", "ApiKeyMiddleware", "BodyLimitMiddleware"]

# answered without a key, as llama-server's public endpoints
PUBLIC_PATHS = frozenset({"/health", "/v1/health", "/models", "/v1/models", "/api/tags"})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for k, v in scope.get("headers", []):
        if k == name:
            return v.decode("latin-1")
    return None


class ApiKeyMiddleware:
    def __init__(self, app: Any, keys: list[str], public: frozenset[str] = PUBLIC_PATHS) -> None:
        self.app = app
        self.keys = [k.encode() for k in keys]
        self.public = public

    def _allowed(self, scope: dict[str, Any]) -> bool:
        given = _header(scope, b"x-api-key")
        auth = _header(scope, b"authorization")
        if given is None and auth and auth[:7].lower() == "bearer ":
            given = auth[7:].strip()
        if given is None:
            return False
        g = given.encode()
        # compare against every key so timing does not tell which one nearly matched
        ok = False
        for k in self.keys:
            ok |= hmac.compare_digest(g, k)
        return ok

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and self.keys
            and scope.get("method") != "OPTIONS"
            and scope["path"] not in self.public
            and not self._allowed(scope)
        ):
            await error_response(401, "Invalid API Key", path=scope["path"])(scope, receive, send)
            return
        await self.app(scope, receive, send)


MAX_HEADERS = 100  # as h11's and llama-server's limits, roughly
MAX_HEADER_BYTES = 16 * 1024


class BodyLimitMiddleware:
    """413 past ``max_bytes``, or past the limit ``larger`` gives a path (uploads)."""

    def __init__(self, app: Any, max_bytes: int, larger: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = larger or {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        if (
            len(headers) > MAX_HEADERS
            or sum(len(k) + len(v) for k, v in headers) > MAX_HEADER_BYTES
        ):
            await error_response(431, "request headers too large", path=scope["path"])(
                scope, receive, send
            )
            return
        limit = self.larger.get(scope["path"], self.max_bytes)
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await self._too_large(scope, receive, send)
            return
        seen = 0

        async def bounded() -> Any:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise _TooLarge()
            return msg

        try:
            await self.app(scope, bounded, send)
        except _TooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        limit = self.larger.get(scope["path"], self.max_bytes)
        message = f"the request body exceeds {limit} bytes"
        await error_response(413, message, path=scope["path"])(scope, receive, send)


class _TooLarge(Exception):
    pass
