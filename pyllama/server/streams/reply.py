"""``sse_reply``: how every generation route answers ``stream: true``. With an
``X-Conversation-Id`` header the generation runs as its own task writing into a resumable
session, and the response reads that session: a client that disconnects stops only its
read, the generation goes on, and ``GET /v1/stream`` reads it again (llama-server's
``server_res_spipe``). Without the header, the response drives the generation itself and a
disconnect cancels it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from starlette.requests import Request
from starlette.responses import StreamingResponse

from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import SSE_HEADERS, sse_body, sse_response
from pyllama.server.streams.registry import StreamSessions
from pyllama.server.streams.session import OffsetLost, StreamSession

__all__ = ["CONV_HEADER", "read_session", "sse_reply"]

log = logging.getLogger("pyllama.server")

CONV_HEADER = "x-conversation-id"


def sse_reply(
    request: Request,
    chunks: AsyncIterator[bytes],
    on_error: Callable[[APIError], bytes] | None = None,
    ping_s: float = -1,
) -> StreamingResponse:
    conv_id = request.headers.get(CONV_HEADER, "")
    if not conv_id:
        return sse_response(chunks, on_error, ping_s)
    sessions: StreamSessions = request.app.state.streams
    session = sessions.create_or_replace(conv_id)
    body = sse_body(chunks, on_error, ping_s)
    sessions.produced_by(session, asyncio.create_task(_produce(session, body)))
    return read_session(session, 0)


def read_session(session: StreamSession, offset: int) -> StreamingResponse:
    return StreamingResponse(
        _read(session, offset), media_type="text/event-stream", headers=SSE_HEADERS
    )


async def _read(session: StreamSession, offset: int) -> AsyncIterator[bytes]:
    try:
        async for chunk in session.read_from(offset):
            yield chunk
    except OffsetLost:  # a reader that fell a whole buffer behind: the stream ends there
        log.warning("stream reader of conv_id=%s fell behind the buffer", session.conversation_id)


async def _produce(session: StreamSession, body: AsyncIterator[bytes]) -> None:
    # Cancelled by DELETE /v1/stream, a newer generation of the conversation or shutdown:
    # closing ``body`` closes the task streams, which cancels the engine tasks.
    try:
        async with contextlib.aclosing(body):  # type: ignore[type-var]
            async for chunk in body:
                session.append(chunk)
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("resumable stream of conv_id=%s failed", session.conversation_id)
    finally:
        session.finalize()
