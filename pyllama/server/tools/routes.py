"""``GET /tools`` (the list) and ``POST /tools`` (one call), llama-server's experimental
tools API for the web UI and agents. Without ``--tools`` or MCP servers both answer 403.

A call runs on a worker thread. Streaming (``"stream": true``) sends each chunk as
``data: {"chunk": ...}`` and ends with ``data: {"done": true}`` (``"error"`` added when the
tool raised); a client that leaves makes the tool's ``ToolStream.alive()`` false.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError, feature_disabled
from pyllama.server.http.wire import json_body, json_response, sse, sse_response
from pyllama.server.tools.base import HEADER_PARAMS, Tool, ToolNotFound, ToolStream
from pyllama.server.tools.params import ToolParamError
from pyllama.server.tools.registry import ToolBox

__all__ = ["ROUTES"]


def _toolbox(request: Request) -> ToolBox:
    box: ToolBox | None = getattr(request.app.state, "tools", None)
    if box is None:
        raise feature_disabled()
    return box


async def list_tools(request: Request) -> Response:
    return json_response(_toolbox(request).describe())


async def call_tool(request: Request) -> Response:
    box = _toolbox(request)
    body = await json_body(request)
    name = body.get("tool")
    if not isinstance(name, str):
        raise APIError(400, "'tool' must be a string naming the tool")
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise APIError(400, "'params' must be an object")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise APIError(400, "'stream' must be a boolean")
    params = {k: v for k, v in params.items() if k not in HEADER_PARAMS}
    for key, header in HEADER_PARAMS.items():
        if value := request.headers.get(header):
            params[key] = value
    if "runtime" not in params and box.runtime is not None:
        params["runtime"] = await run_in_threadpool(box.runtime.spec)  # may respawn its container
    try:
        tool = box.find(name, stream)
    except ToolNotFound as e:
        raise APIError(404, str(e), "invalid_request_error") from None
    if stream:
        return sse_response(_stream(tool, params))
    try:
        result = await run_in_threadpool(tool.invoke, params, None)
    except ToolParamError as e:  # a missing or mistyped parameter
        raise APIError(400, str(e)) from e
    except Exception as e:
        raise APIError(500, str(e) or type(e).__name__) from e
    return json_response(result)


async def _stream(tool: Tool, params: dict[str, Any]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    stopped = threading.Event()

    def put(event: dict[str, Any]) -> None:  # on the tool's thread
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
            loop.call_soon_threadsafe(events.put_nowait, event)

    def run() -> None:
        done: dict[str, Any] = {"done": True}
        try:
            tool.invoke(params, ToolStream(lambda chunk: put({"chunk": chunk}), stopped))
        except Exception as e:
            done["error"] = str(e) or type(e).__name__
        put(done)

    worker = loop.run_in_executor(None, run)
    try:
        while True:
            event = await events.get()
            yield sse(event)
            if event.get("done"):
                break
    finally:
        stopped.set()  # a client that left stops the tool
        if worker.done():
            worker.result()


ROUTES = [
    ("/tools", list_tools, ["GET"]),
    ("/tools", call_tool, ["POST"]),
]
