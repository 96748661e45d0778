"""Drive an ASGI app in this process: its lifespan, and one HTTP request at a time.

A Ray Serve replica runs ``create_app(...)`` without a socket: the ingress forwards each
request as plain data (``Forwarded``) and this module plays the ASGI server for it. All of it
runs on the replica's one event loop (the loop AsyncEngine attaches its pipe to), so nothing
here needs a lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Forwarded", "Lifespan", "ResponseStart", "call"]

log = logging.getLogger("pyllama.serve")

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Forwarded:
    """One HTTP request as plain, picklable data (what crosses from ingress to replica)."""

    method: str
    path: str
    query_string: bytes = b""
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    client: tuple[str, int] | None = None
    # chained hashes of the prompt's blocks (pyllama.serve.prefix), read by the router
    prefix_blocks: tuple[int, ...] = ()
    origin: str = ""  # the ingress replica that forwarded it (replicas report work by it)
    to_replica: str | None = None  # a broadcast's target: the router sends it there only


@dataclass(frozen=True)
class ResponseStart:
    """The first part of a forwarded response; bytes parts (the body) follow it."""

    status: int
    headers: Headers


class Lifespan:
    """Run an app's ASGI lifespan: ``await start()`` (raises if startup fails), ``await stop()``."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self._task = asyncio.ensure_future(self._app(scope, self._inbox.get, self._outbox.put))
        await self._inbox.put({"type": "lifespan.startup"})
        replied = asyncio.ensure_future(self._outbox.get())
        await asyncio.wait({replied, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not replied.done():  # the app returned or raised without answering the startup
            replied.cancel()
            err = self._task.exception()
            raise RuntimeError(f"the app's lifespan ended before its startup: {err!r}")
        reply = replied.result()
        if reply["type"] != "lifespan.startup.complete":
            with contextlib.suppress(BaseException):  # its exception is the message below
                await self._task
            raise RuntimeError(reply.get("message") or "the app's startup failed")

    async def stop(self) -> None:
        if self._task is None or self._task.done():
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        with contextlib.suppress(Exception):
            await self._outbox.get()
        await self._task


async def call(app: Any, req: Forwarded) -> AsyncIterator[ResponseStart | bytes]:
    """Serve ``req`` with ``app``: yields a ResponseStart, then the body's chunks as they are
    sent. Closing the iterator early is a client disconnect: the app's ``receive`` answers
    ``http.disconnect`` and its task is cancelled, as under uvicorn."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": req.method,
        "scheme": "http",
        "path": req.path,
        "raw_path": req.path.encode("latin-1"),
        "query_string": req.query_string,
        "root_path": "",
        "headers": list(req.headers),
        "client": req.client,
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    parts: asyncio.Queue[ResponseStart | bytes | None] = asyncio.Queue()
    gone = asyncio.Event()
    body_sent = False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": req.body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if gone.is_set():
            raise OSError("client disconnected")
        if message["type"] == "http.response.start":
            parts.put_nowait(ResponseStart(message["status"], list(message.get("headers", []))))
        elif message["type"] == "http.response.body":
            if message.get("body"):
                parts.put_nowait(bytes(message["body"]))
            if not message.get("more_body", False):
                parts.put_nowait(None)

    async def run() -> None:
        try:
            await app(scope, receive, send)
        finally:
            parts.put_nowait(None)  # an app that ends without a last body part ends the stream

    task = asyncio.ensure_future(run())
    try:
        while (part := await parts.get()) is not None:
            yield part
        try:
            await task
        except Exception:  # Starlette re-raises after its 500 went out, as under uvicorn: log it
            log.exception("%s %s raised after its response", req.method, req.path)
    finally:
        gone.set()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
