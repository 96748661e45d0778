"""Request bodies in, JSON and SSE out: orjson everywhere, pydantic for validation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pyllama.server.http.errors import APIError

__all__ = [
    "SSE_HEADERS",
    "AnyObject",
    "Body",
    "describe_validation",
    "json_body",
    "json_response",
    "parse",
    "sse",
    "sse_body",
    "sse_response",
]

M = TypeVar("M", bound=BaseModel)


class Body(BaseModel):
    """A request body's model: fields it does not declare are kept and ignored, as
    llama-server ignores them."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AnyObject(Body):
    """Any JSON object (endpoints that take free-form settings)."""


def json_response(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def describe_validation(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"]) or "body"
        parts.append(f"'{loc}': {err['msg']}")
    return "invalid request: " + "; ".join(parts)


async def json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object, 400 if it is not one.

    The body is read as JSON whatever its Content-Type, as llama-server reads it (``curl
    -d`` sends ``application/x-www-form-urlencoded``), except from a browser: a request
    with an ``Origin`` header and a type a page may post cross-site without a CORS
    preflight (a form, ``text/plain``) gets 415, so no web page can drive the server
    through a form post. Browsers send ``Origin`` with every cross-site POST; a
    JSON-typed one needs a preflight, which CORS answers."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    json_typed = ctype == "application/json" or ctype.endswith("+json")
    if ctype and not json_typed and "origin" in request.headers:
        raise APIError(415, f"expected Content-Type application/json, got '{ctype}'")
    body = await request.body()
    try:
        data = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError as e:
        raise APIError(400, f"the body is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise APIError(400, "the body must be a JSON object")
    return data


async def parse(request: Request, model: type[M]) -> M:
    """The JSON body validated into ``model``; 400 with the field at fault otherwise."""
    data = await json_body(request)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise APIError(400, describe_validation(e)) from e


SSE_PING = b":\n\n"  # llama-server's keep-alive: an SSE comment


def sse(data: Any) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_response(
    chunks: AsyncIterator[bytes],
    on_error: Callable[[APIError], bytes] | None = None,
    ping_s: float = -1,
) -> StreamingResponse:
    """Starlette cancels ``chunks`` when the client goes away; its ``finally`` blocks
    close the task streams, which cancels the engine tasks and frees their slots."""
    return StreamingResponse(
        sse_body(chunks, on_error, ping_s), media_type="text/event-stream", headers=SSE_HEADERS
    )


async def sse_body(
    chunks: AsyncIterator[bytes],
    on_error: Callable[[APIError], bytes] | None = None,
    ping_s: float = -1,
) -> AsyncIterator[bytes]:
    """The bytes of an SSE reply. An error after the first byte travels as an event:
    ``on_error`` writes it (default: llama-server's envelope as a ``data:`` line). After
    ``ping_s`` seconds without a chunk (``--sse-ping-interval``; <= 0: never) a ``:``
    comment line keeps proxies and clients that time out idle connections (undici) from
    closing it, as llama-server does."""
    try:
        async for chunk in _pinged(chunks, ping_s):
            yield chunk
    except APIError as e:
        yield on_error(e) if on_error is not None else sse(e.body())


async def _pinged(chunks: AsyncIterator[bytes], ping_s: float) -> AsyncIterator[bytes]:
    if ping_s <= 0:
        async for chunk in chunks:
            yield chunk
        return
    it = chunks.__aiter__()
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(it.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=ping_s)
            if not done:
                yield SSE_PING
                continue
            try:
                chunk = pending.result()
            except StopAsyncIteration:
                pending = None
                return
            pending = None
            yield chunk
    finally:
        if pending is not None:  # the client left mid-wait: end the generator there
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()
