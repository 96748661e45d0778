"""llama-server's error envelope: ``{"error": {"code", "message", "type"}}``, and the
other protocols' shapes (Anthropic, Ollama) chosen by the request path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

__all__ = [
    "TYPES",
    "APIError",
    "error_body",
    "error_response",
    "feature_disabled",
    "register_shape",
    "shaped_error",
]

# HTTP status -> llama-server error type
TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    431: "invalid_request_error",
    500: "server_error",
    501: "not_supported_error",
    503: "unavailable_error",
}


class APIError(Exception):
    """Raised anywhere in a handler; the app turns it into the envelope."""

    def __init__(self, status: int, message: str, type_: str | None = None, **extra: Any):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_ or TYPES.get(status, "server_error")
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.type, **self.extra)


def feature_disabled() -> APIError:
    """llama-server's 403 for an endpoint its flags leave off (/tools, /cors-proxy)."""
    return APIError(403, "this feature is disabled", "feature_disabled")


def error_body(status: int, message: str, type_: str | None = None, **extra: Any) -> dict[str, Any]:
    err = {"code": status, "message": message, "type": type_ or TYPES.get(status, "server_error")}
    err.update(extra)
    return {"error": err}


# (status, message, type, extra) -> body, for the routes under a path prefix
ErrorShape = Callable[[int, str, str, dict[str, Any]], Any]
_SHAPES: list[tuple[str, ErrorShape]] = []


def register_shape(prefixes: tuple[str, ...], shape: ErrorShape) -> None:
    """Errors on paths starting with one of ``prefixes`` take ``shape`` (a protocol's own
    error body) instead of llama-server's envelope."""
    _SHAPES.extend((p, shape) for p in prefixes)


def shaped_error(
    status: int, message: str, type_: str | None = None, path: str = "", **extra: Any
) -> Any:
    """The error body for a route under ``path``: its protocol's shape, else llama-server's."""
    type_ = type_ or TYPES.get(status, "server_error")
    for prefix, shape in _SHAPES:
        if path.startswith(prefix):
            return shape(status, message, type_, extra)
    return error_body(status, message, type_, **extra)


def error_response(
    status: int, message: str, type_: str | None = None, path: str = "", **extra: Any
) -> Response:
    body = shaped_error(status, message, type_, path, **extra)
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


async def handle_api_error(request: Request, exc: Exception) -> Response:
    """Starlette exception handler: an APIError becomes its envelope."""
    assert isinstance(exc, APIError)
    return error_response(exc.status, exc.message, exc.type, request.url.path, **exc.extra)


async def handle_http_error(request: Request, exc: Exception) -> Response:
    """Starlette exception handler: routing errors (404, 405) in the same envelope."""
    assert isinstance(exc, HTTPException)
    message = "File Not Found" if exc.status_code == 404 else str(exc.detail)
    return error_response(exc.status_code, message, path=request.url.path)
