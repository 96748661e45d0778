"""``GET``/``DELETE /v1/stream`` and ``POST /v1/streams/lookup``, as llama-server's
``server_stream_make_*_handler``. The id travels in ``?conv_id=`` (it may hold a model name
with slashes)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import json_body, json_response
from pyllama.server.streams.registry import StreamSessions
from pyllama.server.streams.reply import read_session

__all__ = ["ROUTES", "conv_id_param", "requested_ids"]


def _sessions(request: Request) -> StreamSessions:
    return request.app.state.streams


def conv_id_param(request: Request) -> str:
    conv_id = request.query_params.get("conv_id", "")
    if not conv_id:
        raise APIError(400, "Missing conversation id in path")
    return conv_id


def from_param(request: Request) -> int:
    raw = request.query_params.get("from", "")
    if not raw:
        return 0
    if not raw.isdigit():
        raise APIError(400, "Invalid 'from' offset")
    return int(raw)


async def requested_ids(request: Request) -> list[str]:
    """The body's ``conversation_ids`` (non-empty strings; anything else is left out)."""
    try:
        body = await json_body(request)
    except APIError as e:
        raise APIError(400, f"invalid body: {e.message}") from e
    ids = body.get("conversation_ids")
    return [i for i in ids if isinstance(i, str) and i] if isinstance(ids, list) else []


async def stream_get(request: Request) -> Response:
    """The session's bytes from ``?from=`` (default 0), then live ones until it ends."""
    conv_id = conv_id_param(request)
    session = _sessions(request).get(conv_id)
    if session is None:
        raise APIError(404, "Stream not found or expired")
    offset = from_param(request)
    if offset < session.dropped:
        raise APIError(400, "Stream offset lost, please restart")
    return read_session(session, offset)


async def stream_delete(request: Request) -> Response:
    """The user's Stop: the generation is cancelled and its buffer dropped. 204 even when
    the session is already gone."""
    _sessions(request).evict_and_cancel(conv_id_param(request))
    return Response(status_code=204)


async def streams_lookup(request: Request) -> Response:
    """Only the ids the caller names are answered: it cannot list other conversations."""
    found = _sessions(request).lookup(await requested_ids(request))
    out: list[dict[str, Any]] = [s.describe() for s in found]
    return json_response(out)


ROUTES = [
    ("/v1/stream", stream_get, ["GET"]),
    ("/v1/stream", stream_delete, ["DELETE"]),
    ("/v1/streams/lookup", streams_lookup, ["POST"]),
]
