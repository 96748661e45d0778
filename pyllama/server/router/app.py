"""Router mode: one front server, one ``pyllama-server`` child per loaded model.

Started with a router flag (``--models-dir``, ``--models-preset``, ``--models-max``,
``--[no-]models-autoload``) and no ``-m``. A request names its model (the body's
``model``, or ``?model=`` for GET routes) and is proxied, streamed as it comes, to that
model's child, which is loaded first when autoload is on (per request: ``?autoload=``).
``/models`` lists every known model with its status; ``/models/load``,
``/models/unload``, ``POST /models`` (download from the hub into llama.cpp's cache) and
``DELETE /models`` (remove from the cache) manage them, and ``/models/sse`` streams their
status changes and download progress, as llama-server's router. As there, ``POST /models``
fetches from the hub even under ``--offline``; nothing else the router does goes to the
network (see ``table``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from pyllama import _core
from pyllama.server.http.auth import ApiKeyMiddleware
from pyllama.server.http.errors import APIError, handle_api_error, handle_http_error
from pyllama.server.http.multipart import parse_form
from pyllama.server.http.openapi import ROUTES as OPENAPI_ROUTES
from pyllama.server.http.routing import IndexedRouter
from pyllama.server.http.wire import json_body, json_response
from pyllama.server.router import streams
from pyllama.server.router.forward import forward, table_of
from pyllama.server.router.table import ModelEntry, ModelTable
from pyllama.server.settings import Settings
from pyllama.server.tools import proxy as cors_proxy
from pyllama.server.tools import routes as tool_routes
from pyllama.server.tools.registry import ToolBox

__all__ = ["create_router_app"]

# routes whose body names the model (llama-server's proxied POST routes, plus Ollama's)
POST_ROUTES = [
    "/completion",
    "/completions",
    "/v1/completions",
    "/chat/completions",
    "/v1/chat/completions",
    "/v1/chat/completions/control",
    "/chat/completions/input_tokens",
    "/v1/chat/completions/input_tokens",
    "/responses",
    "/v1/responses",
    "/responses/input_tokens",
    "/v1/responses/input_tokens",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/infill",
    "/embedding",
    "/embeddings",
    "/v1/embeddings",
    "/rerank",
    "/reranking",
    "/v1/rerank",
    "/v1/reranking",
    "/tokenize",
    "/detokenize",
    "/apply-template",
    "/props",
    "/lora-adapters",
    "/slots/{id_slot}",
    "/api/chat",
    "/api/generate",
    "/api/embed",
    "/api/embeddings",
    "/api/show",
]
GET_ROUTES = ("/metrics", "/slots", "/lora-adapters")  # the model in ?model=
FORM_ROUTES = ("/v1/audio/transcriptions", "/audio/transcriptions")  # multipart uploads


def _named(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise APIError(400, "model name is missing from the request")
    return name


def _ollama_entry(table: ModelTable, name: str) -> ModelEntry:
    """Ollama's routes: ``name:latest`` is ``name``, as Ollama reads a name without a tag,
    and a model the router does not know is Ollama's 404."""
    entry = table.lookup(name)
    if entry is None and name.endswith(":latest"):
        entry = table.lookup(name.removesuffix(":latest"))
    if entry is None:
        raise APIError(404, f"model '{name}' not found")
    return entry


async def proxy_post(request: Request) -> Response:
    body = await request.body()
    name = _named((await json_body(request)).get("model"))
    table = table_of(request)
    entry = _ollama_entry(table, name) if request.url.path.startswith("/api/") else table.get(name)
    return await forward(request, entry, body, streams.stop_check(request, name))


async def proxy_form(request: Request) -> Response:
    """A multipart upload (audio transcriptions): the model in its ``model`` field."""
    body = await request.body()
    form = await asyncio.to_thread(parse_form, request.headers.get("content-type", ""), body)
    return await forward(request, table_of(request).get(_named(form.get("model"))), body)


async def proxy_get(request: Request) -> Response:
    name = _named(request.query_params.get("model"))
    return await forward(request, table_of(request).get(name), b"")


async def health(request: Request) -> Response:
    return json_response({"status": "ok"})


async def props(request: Request) -> Response:
    if request.query_params.get("model"):
        return await proxy_get(request)
    s: Settings = request.app.state.settings
    return json_response(
        {
            "role": "router",
            "max_instances": s.models_max,
            "models_autoload": s.models_autoload,
            "model_alias": "pyllama-server",
            "model_path": "none",
            "default_generation_settings": {"params": {}, "n_ctx": 0},
            "ui_settings": s.ui_config or {},  # --webui-config, for the chat page
            "build_info": _core.build_info(),
        }
    )


@functools.lru_cache(maxsize=256)
def _caps(path: str) -> tuple[bool, bool]:
    from pyllama import _core

    return tuple(_core.projector_caps(path))  # type: ignore[return-value]


def _inputs(entry: ModelEntry) -> list[str]:
    """ "text", plus "image" and "audio" as the model's projector takes them."""
    path = entry.projector()
    vision, audio = _caps(path) if path and os.path.isfile(path) else (False, False)
    return ["text"] + ["image"] * vision + ["audio"] * audio


def _describe(entry: ModelEntry) -> dict[str, Any]:
    status: dict[str, Any] = {"value": entry.status, "args": entry.args}
    if entry.preset:
        status["preset"] = entry.preset
    if entry.status == "failed":
        status["exit_code"] = entry.exit_code
        status["failed"] = True
    if entry.status == "downloading":  # url -> {"done": bytes, "total": bytes}
        status["progress"] = dict(entry.progress)
    return {
        "id": entry.name,
        "aliases": entry.aliases,
        "tags": [],
        "object": "model",
        "owned_by": "llamacpp",
        "created": int(time.time()),
        "status": status,
        "architecture": {"input_modalities": _inputs(entry), "output_modalities": ["text"]},
        "source": entry.source,
        "can_remove": entry.source == "cache",
    }


async def models(request: Request) -> Response:
    table = table_of(request)
    if request.query_params.get("reload"):
        await table.reload()
    data = [_describe(e) for e in table.models.values() if not e.hidden]
    return json_response({"object": "list", "data": data})


def _require_key(request: Request) -> None:
    """``/models`` answers GET without a key (a public listing), so the methods that change
    the cache check the key here."""
    keys = request.app.state.settings.api_keys
    if keys and not ApiKeyMiddleware(None, keys)._allowed(request.scope):
        raise APIError(401, "Invalid API Key")


def _model_param(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise APIError(400, "model must be a non-empty string")
    return value


async def load(request: Request) -> Response:
    table = table_of(request)
    name = _named((await json_body(request)).get("model"))
    entry = table.lookup(name)
    if entry is None:
        raise APIError(404, "model is not found")
    if entry.status in ("downloading", "downloaded"):
        raise APIError(400, f"model '{entry.name}' is downloading")
    if entry.running:
        raise APIError(400, "model is already running")
    await table.load(entry)
    return json_response({"success": True})


async def unload(request: Request) -> Response:
    table = table_of(request)
    entry = table.get(_named((await json_body(request)).get("model")))
    if not entry.running and entry.status != "downloading":
        raise APIError(400, "model is not running")
    await table.unload(entry)  # a download in flight is cancelled
    return json_response({"success": True})


async def download(request: Request) -> Response:
    """``POST /models``: start fetching a hub model; ``/models/sse`` tells how it goes."""
    _require_key(request)
    name = _model_param((await json_body(request)).get("model"))
    table_of(request).start_download(name)
    return json_response({"success": True})


async def delete(request: Request) -> Response:
    _require_key(request)
    table = table_of(request)
    name = _model_param(request.query_params.get("model"))
    entry = table.lookup(name)
    if entry is None:
        raise APIError(404, f"model name={name} is not found")
    if entry.source != "cache":
        raise APIError(400, f"model name={name} is not removable (not from cache)")
    await table.remove(entry)
    return json_response({"success": True})


async def models_sse(request: Request) -> Response:
    """Status changes and download progress, one ``data: {"model", "event", "data"}``
    line per event, as llama-server's ``/models/sse``. The subscriber is registered before
    the response starts, so an event caused after the client saw the headers reaches it."""
    table = table_of(request)
    queue = table.events.subscribe()

    async def stream() -> AsyncIterator[bytes]:
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), 1.0)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        return
                    continue
                if item is None:  # shutting down, or a reader that fell too far behind
                    return
                yield item
        finally:
            table.events.unsubscribe(queue)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def create_router_app(
    settings: Settings,
    middleware: list[Any],
    tools: ToolBox | None = None,
    pages: list[Route] | None = None,
) -> Starlette:
    """``pages``: the chat page's routes (``/`` and its files), served before the API's."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.models = table = ModelTable(
            settings.child_args,
            settings.models_dir,
            settings.models_preset,
            settings.models_max,
            verbose=settings.verbose,
        )
        # uvicorn waits for open responses before the lifespan ends: a SIGTERM ends the
        # /models/sse streams first (the signal handler runs on this loop's thread, between
        # two callbacks, so it only schedules the close)
        loop = asyncio.get_running_loop()
        app.state.on_exit_signal = lambda: loop.call_soon_threadsafe(table.events.close)
        try:
            yield
        finally:
            await app.state.models.close()
            if tools is not None:
                tools.close()

    routes = [
        *(pages or []),
        Route("/health", health, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        Route("/props", props, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/models/load", load, methods=["POST"]),
        Route("/models/unload", unload, methods=["POST"]),
        Route("/models/sse", models_sse, methods=["GET"]),
        Route("/models", download, methods=["POST"]),
        Route("/models", delete, methods=["DELETE"]),
        *(Route(p, proxy_post, methods=["POST"]) for p in POST_ROUTES),
        *(Route(p, proxy_form, methods=["POST"]) for p in FORM_ROUTES),
        *(Route(p, proxy_get, methods=["GET"]) for p in GET_ROUTES),
        *(Route(p, fn, methods=m) for p, fn, m in streams.ROUTES),
        *(Route(p, fn, methods=m) for p, fn, m in (*tool_routes.ROUTES, *cors_proxy.ROUTES)),
        *(Route(p, fn, methods=m) for p, fn, m in OPENAPI_ROUTES),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={APIError: handle_api_error, HTTPException: handle_http_error},
    )
    app.router = IndexedRouter(app.router.routes, lifespan=lifespan)
    app.state.settings = settings
    app.state.conv_owners = streams.ConvOwners()
    app.state.tools = tools
    app.state.cors_proxy = settings.ui_mcp_proxy
    return app
