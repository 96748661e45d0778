"""Proxying a request to a model's child: the model loaded first (autoload), the
response relayed as it comes, the model marked busy until it ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pyllama.server.http.errors import APIError, shaped_error
from pyllama.server.http.wire import sse
from pyllama.server.router.entry import ModelEntry
from pyllama.server.router.table import FAKE_DELAY_S, ModelTable
from pyllama.server.settings import Settings

__all__ = ["Relay", "forward", "table_of"]

_STOPPED = "request cancelled by a stop while the model was loading"  # llama-server's

# hop-by-hop and recomputed headers, not forwarded in either direction
_DROP = frozenset(
    {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "authorization"}
    | {"x-api-key", "date", "server"}
)


def table_of(request: Request) -> ModelTable:
    return request.app.state.models


def _autoload(request: Request, settings: Settings) -> bool:
    value = request.query_params.get("autoload")
    return settings.models_autoload if value is None else value in ("1", "true")


async def forward(
    request: Request,
    entry: ModelEntry,
    body: bytes,
    stopped: Callable[[], Awaitable[bool]] | None = None,
) -> Response:
    """Proxy the request to ``entry``'s child, loading it first when autoload is on. The
    wait for the load ends when the client leaves, or when ``stopped`` says so instead
    (a resumable stream's request, which a stop cancels and a disconnect does not)."""
    table = table_of(request)
    autoload = _autoload(request, request.app.state.settings)
    if entry.status in ("downloading", "downloaded"):
        raise APIError(400, f"model '{entry.name}' is downloading")
    if not entry.running and not autoload:
        raise APIError(400, "model is not loaded")
    if autoload:  # waits in the queue for a slot when every one is taken
        try:
            await table.ensure_ready(entry, stopped or request.is_disconnected)
        except APIError:
            if stopped is not None and await stopped():
                raise APIError(400, _STOPPED) from None
            raise
    if stopped is not None and await stopped():
        raise APIError(400, _STOPPED)
    if not entry.running:
        raise APIError(400, f"model name={entry.name} is not running")
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROP]
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "autoload"]
    entry.busy += 1  # from here on, loading another model never evicts this one
    if request.method == "POST":  # as llama-server: only POST requests count as a use
        entry.last_used = time.monotonic()
    try:
        if table.fake_timing:
            await asyncio.sleep(FAKE_DELAY_S)
        await table.wait_ready(entry)
        url = f"http://127.0.0.1:{entry.port}{request.url.path}"
        req = table.client.build_request(
            request.method, url, params=params, headers=headers, content=body
        )
        upstream = await table.client.send(req, stream=True)
    except httpx.HTTPError as e:  # the child went away before it answered (killed, crashed)
        table.release(entry)
        raise APIError(500, _gone(entry, e)) from None
    except BaseException:
        table.release(entry)
        raise
    out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _DROP}
    return Relay(upstream, table, entry, out_headers)


def _gone(entry: ModelEntry, e: httpx.HTTPError) -> str:
    return f"model '{entry.name}' stopped answering: its server went away ({type(e).__name__})"


class Relay(StreamingResponse):
    """A child's response, passed on as it comes. The child's connection is closed and the
    model marked idle however the response ends: finished, failed, or a client that left
    before the first byte (a generator's ``finally`` would not run if it never started).
    Closing that connection makes the child cancel its task."""

    def __init__(
        self,
        upstream: httpx.Response,
        table: ModelTable,
        entry: ModelEntry,
        headers: dict[str, str],
    ):
        super().__init__(
            self._relay(upstream, entry), status_code=upstream.status_code, headers=headers
        )
        self.upstream = upstream
        self.table = table
        self.entry = entry

    @staticmethod
    async def _relay(upstream: httpx.Response, entry: ModelEntry) -> AsyncIterator[bytes]:
        """The child's bytes; if it dies mid-answer, a last error in the stream's own framing
        (the status line is long gone) instead of a connection cut mid-chunk."""
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        except httpx.HTTPError as e:
            message = _gone(entry, e)
            kind = upstream.headers.get("content-type", "")
            if kind.startswith("text/event-stream"):  # the route's own error shape
                body = shaped_error(500, message, path=upstream.request.url.path)
                # protocols whose events are typed (Anthropic) name the event after it
                named = isinstance(body, dict) and isinstance(body.get("type"), str)
                yield (b"event: " + body["type"].encode() + b"\n" if named else b"") + sse(body)
            elif kind.startswith("application/x-ndjson"):  # Ollama's error line
                yield orjson.dumps({"error": message}) + b"\n"
            # a plain body cut short stays cut: no framing can mark it

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.upstream.aclose()
            self.table.release(self.entry)
