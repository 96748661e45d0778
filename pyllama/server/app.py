"""``create_app(settings)``: the Starlette application, and ``serve`` for the CLI."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pyllama import hardware
from pyllama.model_file import ModelFileError, check_model_file
from pyllama.server.batch import Batches
from pyllama.server.batch import routes as batch_routes
from pyllama.server.batch.routes import UPLOAD_PATHS
from pyllama.server.http.auth import PUBLIC_PATHS, ApiKeyMiddleware, BodyLimitMiddleware
from pyllama.server.http.cors import CorsMiddleware
from pyllama.server.http.errors import APIError, error_response, handle_api_error, handle_http_error
from pyllama.server.http.header_case import title_case_protocol
from pyllama.server.http.io_timeout import with_io_timeout
from pyllama.server.http.listen import bind_all, split_hosts
from pyllama.server.http.openapi import ROUTES as OPENAPI_ROUTES
from pyllama.server.http.prefix import PrefixMiddleware
from pyllama.server.http.routing import IndexedRouter
from pyllama.server.http.threads import use_worker_threads
from pyllama.server.logs import setup_logging
from pyllama.server.ops import admin
from pyllama.server.ops.sleep import WakeMiddleware
from pyllama.server.protocols.anthropic import routes as anthropic
from pyllama.server.protocols.gcp import gcp_routes
from pyllama.server.protocols.native import infill, rerank, slots
from pyllama.server.protocols.native import routes as native
from pyllama.server.protocols.ollama import routes as ollama
from pyllama.server.protocols.ollama.models import root as ollama_root
from pyllama.server.protocols.openai import routes as openai
from pyllama.server.protocols.responses import routes as responses
from pyllama.server.settings import Settings
from pyllama.server.state import ServerState
from pyllama.server.streams import StreamSessions
from pyllama.server.streams import routes as streams
from pyllama.server.tools import proxy as cors_proxy
from pyllama.server.tools import routes as tool_routes
from pyllama.server.tools.registry import ToolBox
from pyllama.server.webui import public_paths, static_root, webui_routes

__all__ = ["create_app", "serve"]

log = logging.getLogger("pyllama.server")


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s", request.url.path)
    return error_response(
        500, f"internal error: {type(exc).__name__}: {exc}", path=request.url.path
    )


def create_app(
    settings: Settings | None = None,
    state: ServerState | None = None,
    tools: ToolBox | None = None,
) -> Starlette:
    """A Starlette app serving llama-server's API. The lifespan loads the model (in the
    background, /health says 503 until it is ready) and stops the engine at shutdown.
    ``tools`` serves /tools; by default it is built from the settings' tool flags."""
    settings = settings or (state.settings if state else Settings())
    state = state or ServerState(settings)
    tools = tools if tools is not None else tools_from_settings(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if settings.threads_http > 0:
            use_worker_threads(settings.threads_http)
        state.start()
        if settings.batch.enabled:  # after the model's load began: lines wait for it
            slots = settings.n_parallel if settings.n_parallel > 0 else 4
            try:
                state.batches = Batches(settings.batch, app, slots, settings.port)
                state.batches.start()
            except (OSError, sqlite3.Error) as e:  # a read-only cache, a bad --batch-dir
                log.warning("the Files and Batch API is off: %s", e)
        try:
            yield
        finally:
            if state.batches is not None:
                await state.batches.stop()
                state.batches = None
            app.state.streams.close()
            if tools is not None:
                tools.close()
            await state.stop()

    modules = (native, slots, openai, admin, infill, rerank, anthropic, responses, ollama)
    modules += (batch_routes,)  # type: ignore[assignment]
    routes = [
        Route(path, fn, methods=methods)
        for module in (*modules, streams, tool_routes, cors_proxy)
        for path, fn, methods in module.ROUTES
    ]
    routes += [Route(path, fn, methods=methods) for path, fn, methods in OPENAPI_ROUTES]
    if settings.gcp is not None:
        routes += gcp_routes(settings.gcp, routes)
    routes = _page_routes(settings, ollama_root) + routes  # its / goes before Ollama's
    if settings.static_path:  # after the API: its files fill in the paths the API leaves
        routes.append(Mount("/", StaticFiles(directory=settings.static_path, html=True)))
    middleware = _middleware(settings)
    if settings.sleep_idle_seconds >= 0:
        middleware.append(Middleware(WakeMiddleware, state=state))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            APIError: handle_api_error,
            HTTPException: handle_http_error,
            Exception: _unexpected,
        },
    )
    app.router = IndexedRouter(app.router.routes, lifespan=lifespan)
    app.state.pyllama = state
    app.state.streams = StreamSessions()
    app.state.tools = tools
    app.state.cors_proxy = settings.ui_mcp_proxy
    return app


def tools_from_settings(settings: Settings) -> ToolBox | None:
    """The /tools registry the flags ask for (None: none). Raises ``ValueError`` for a bad
    tool name, runtime or MCP config; spawns each MCP server once to list its tools."""
    return ToolBox.from_flags(
        settings.tools,
        settings.tools_runtime,
        settings.mcp_servers_config,
        settings.mcp_servers_json,
    )


def _page_routes(settings: Settings, fallback: Any) -> list[Route]:
    """The chat page (``--webui``, on by default) at ``/``, or with ``--no-webui`` only the
    worker that clears an old UI's cache; ``--path`` replaces both with its own files, as in
    llama-server (the router serves no ``--path``)."""
    if not settings.static_path:
        return webui_routes(settings.webui, fallback)
    return static_root(settings.static_path, fallback) if fallback is not None else []


def _middleware(settings: Settings) -> list[Middleware]:
    middleware = []
    if settings.cors_origins:  # outermost, so that errors (401, 413) carry the headers too
        middleware.append(
            Middleware(
                CorsMiddleware,
                origins=settings.cors_origins,
                methods=settings.cors_methods,
                headers=settings.cors_headers,
                credentials=settings.cors_credentials,
            )
        )
    if settings.api_prefix:  # inside CORS, so that its 404 carries the headers too
        middleware.append(Middleware(PrefixMiddleware, prefix=settings.api_prefix))
    middleware.append(
        Middleware(
            BodyLimitMiddleware,
            max_bytes=settings.max_body_bytes,
            larger={p: settings.batch.max_file_bytes + (1 << 20) for p in UPLOAD_PATHS},
        )
    )  # an upload's own limit is the file's (its form adds a little)
    if settings.api_keys:
        # the page loads without a key and asks for it (llama-server's UI is public too)
        public = PUBLIC_PATHS | public_paths(settings.webui and not settings.static_path)
        if settings.gcp is not None and settings.gcp.health_route:
            public = public | {settings.gcp.health_route}  # Vertex AI's probes send no key
        if settings.metrics_public:  # the gateway's endpoint picker sends no key
            public = public | {"/metrics"}
        middleware.append(Middleware(ApiKeyMiddleware, keys=settings.api_keys, public=public))
    return middleware


def serve(settings: Settings) -> int:
    """Run the server until a signal ends it (0), or until it cannot listen or its model
    cannot be loaded (1, with one line on stderr saying why; 2 when the file of a flag such
    as --mmproj is what failed, as for a bad flag)."""
    import uvicorn

    try:
        setup_logging(settings.logs)
    except ValueError as e:
        return _fail(str(e))
    if not settings.router:
        try:  # a mistyped path fails before anything listens
            # (-m with -mu names where the download goes: the file may not be there yet)
            model = None if settings.model_url else settings.model
            for path in (model, settings.model_draft):
                if path is not None:
                    check_model_file(path)
        except ModelFileError as e:
            return _fail(str(e))
    hosts = split_hosts(settings.host)
    try:
        # bound here rather than by uvicorn: a port in use is one clear line, and
        # "listening on" is printed only once every socket is bound
        sockets = bind_all(hosts, settings.port, reuse_port=settings.reuse_port)
    except OSError as e:
        return _fail(str(e))
    try:
        tools = tools_from_settings(settings)
        state = None if settings.router else ServerState(settings)
        if settings.router:
            from pyllama.server.router.app import create_router_app

            pages = _page_routes(settings, None)
            app = create_router_app(settings, _middleware(settings), tools, pages)
        else:
            app = create_app(settings, state=state, tools=tools)
    except ValueError as e:  # a bad tool flag, AIP_PREDICT_ROUTE naming an existing route
        for sock in sockets:
            sock.close()
        return _fail(str(e))
    config: dict[str, Any] = {
        "http": with_io_timeout(title_case_protocol(), settings.timeout_s),
        "log_level": "info" if settings.verbose else "warning",
        "timeout_keep_alive": 30,
    }
    if settings.ssl_key_file or settings.ssl_cert_file:
        config["ssl_keyfile"] = settings.ssl_key_file
        config["ssl_certfile"] = settings.ssl_cert_file
    # by TCP families, not != AF_UNIX: Windows' socket module has no AF_UNIX
    tcp = [s for s in sockets if s.family in (socket.AF_INET, socket.AF_INET6)]
    port = tcp[0].getsockname()[1] if tcp else settings.port  # the real one for --port 0
    where = [h if h.endswith(".sock") else f"http://{_bracket(h)}:{port}" for h in hosts]
    server = _server_class(tools, app, where)(
        uvicorn.Config(app, timeout_graceful_shutdown=5, **config)
    )
    if state is not None:

        def load_failed(message: str) -> None:  # on the event loop, so exit() is safe
            _fail(message)
            server.should_exit = True

        state.on_load_error = load_failed

        def loaded() -> None:  # llama-server logs the same count while it loads
            gpus = [d.name for d in hardware.devices() if d.type != "cpu"]
            if gpus:
                on, of = state.offload
                log.info("offloaded %d/%d layers to GPU (%s)", on, of, ", ".join(gpus))

        state.on_loaded = loaded
    server.run(sockets=sockets)
    if state is not None and state.load_error:
        return state.load_exit_status  # 2: a flag's file (--mmproj) cannot serve
    return 0 if server.started else 1


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _fail(message: str) -> int:
    if logging.getLogger("pyllama").handlers:
        log.error("%s", message)
    else:  # before the log is set up
        print(f"pyllama-server: {message}", file=sys.stderr, flush=True)
    return 1


def _server_class(tools: ToolBox | None, app: Starlette, where: list[str]) -> type:
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit:
                for address in where:
                    log.info("listening on %s", address)
                log.info("devices: %s", hardware.summary())

        def handle_exit(self, sig: int, frame: Any) -> None:
            # before uvicorn waits for open requests: an MCP call in flight returns now,
            # and the app ends the streams that would never end by themselves
            if tools is not None:
                tools.shutdown()
            on_exit = getattr(app.state, "on_exit_signal", None)
            if on_exit is not None:
                on_exit()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown, so the process
            # would die of the signal; a clean shutdown exits 0 instead (as llama-server).
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            sigs = [signal.SIGINT, signal.SIGTERM]
            if sys.platform == "win32":
                sigs.append(signal.SIGBREAK)  # Ctrl-Break: uvicorn's own set there has it
            old = {sig: signal.signal(sig, self.handle_exit) for sig in sigs}
            try:
                yield
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)

    return Server
