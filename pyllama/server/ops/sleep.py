"""``--sleep-idle-seconds``: free the model when idle, reload it on the next request.

The middleware counts the requests that use the model (so a streamed response keeps the
server awake until its last byte) and wakes the server before such a request runs. As in
llama-server, health, props, models and metrics are answered while asleep without waking
it, from what the state keeps (model facts, the engine's last metrics), and so are the
resumable stream routes and the chat page's files; unknown paths,
wrong methods and preflights do not wake it either. It sits inside auth, so a request
without a valid key never loads the model.
"""

from __future__ import annotations

import time

from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from pyllama.server.state import ServerState

__all__ = ["WakeMiddleware"]

_READ_ONLY = frozenset(
    [
        *(
            ("GET", path)
            for path in ("/health", "/v1/health", "/props", "/models", "/v1/models", "/metrics")
        ),
        # the chat page's files (server/webui.py) and Ollama's "/": opening the page does
        # not load the model, its first message does
        *(("GET", path) for path in ("/", "/index.html", "/sw.js")),
        ("HEAD", "/"),
        # resumable streams live beside the model: reading or stopping one needs no model
        ("GET", "/v1/stream"),
        ("DELETE", "/v1/stream"),
        ("POST", "/v1/streams/lookup"),
    ]
)


class WakeMiddleware:
    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    def _uses_model(self, scope: Scope) -> bool:
        if (scope["method"], scope["path"]) in _READ_ONLY or scope["method"] == "OPTIONS":
            return False
        if scope["path"].startswith("/webui/"):  # the page's modules and stylesheet
            return False
        routes = scope["app"].routes
        return any(route.matches(scope)[0] == Match.FULL for route in routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._uses_model(scope):
            await self.app(scope, receive, send)
            return
        state = self.state
        state.in_flight += 1
        try:
            t0 = time.perf_counter_ns()
            await state.wake()
            # what this request waited for the model (a reload after sleep): Ollama's
            # load_duration reads it
            scope.setdefault("state", {})["load_wait_ns"] = time.perf_counter_ns() - t0
            await self.app(scope, receive, send)
        finally:
            state.in_flight -= 1
            state.last_active = time.monotonic()
