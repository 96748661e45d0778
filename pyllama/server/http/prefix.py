"""``--api-prefix``: every route is served under the prefix (llama-server registers each
route as prefix + path); a path outside it is 404 in llama-server's error shape."""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from pyllama.server.http.errors import error_response

__all__ = ["PrefixMiddleware"]


class PrefixMiddleware:
    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not self.prefix:
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            response = error_response(404, "File Not Found", "not_found_error", path=path)
            await response(scope, receive, send)
            return
        inner: dict[str, Any] = dict(scope)
        inner["path"] = path[len(self.prefix) :] or "/"
        raw = scope.get("raw_path")
        if isinstance(raw, bytes) and raw.startswith(self.prefix.encode()):
            inner["raw_path"] = raw[len(self.prefix) :] or b"/"
        await self.app(inner, receive, send)
