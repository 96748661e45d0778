"""Vertex AI's prediction protocol, as llama-server's ``AIP_MODE=PREDICTION`` mode.

``POST /predict`` (``AIP_PREDICT_ROUTE``) takes ``{"instances": [...]}``; each instance
names the endpoint that answers it in ``@requestFormat``, as a path (``/v1/embeddings``)
or its camelCase alias (``chatCompletions``), and the rest of it is that endpoint's body.
The instances run concurrently, through the whole app (auth included), never streamed;
the reply is ``{"predictions": [...]}``, one body (or error) per instance, in order.
``AIP_HEALTH_ROUTE`` adds a health path and ``AIP_HTTP_PORT`` sets the port.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pyllama.server.http.errors import APIError, error_body
from pyllama.server.http.wire import json_body, json_response
from pyllama.server.settings import GcpSettings

__all__ = ["gcp_alias", "gcp_routes"]

MAX_INSTANCES = 128


def gcp_alias(path: str) -> str:
    """``/v1/chat/completions`` -> ``chatCompletions``, ``/apply-template`` -> ``applyTemplate``."""
    path = path.removeprefix("/v1").lstrip("/").split("{")[0]
    out, cap = [], False
    for c in path:
        if c in "/-_":
            cap = True
        else:
            out.append(c.upper() if cap else c)
            cap = False
    return "".join(out)


def gcp_routes(settings: GcpSettings, routes: list[Route]) -> list[Route]:
    """The predict route (and the health alias) over the app's other ``routes``."""
    posts = [r.path for r in routes if r.methods and "POST" in r.methods and "{" not in r.path]
    if settings.predict_route in posts:
        raise ValueError(f"AIP_PREDICT_ROUTE={settings.predict_route} is an existing route")
    aliases: dict[str, str] = {}
    for path in sorted(posts):  # sorted: /completions wins "completions", as llama-server
        aliases.setdefault(gcp_alias(path), path)

    async def predict(request: Request) -> Response:
        data = await json_body(request)
        instances = data.get("instances")
        if not isinstance(instances, list):
            raise APIError(400, "request body must include an array field named instances")
        if len(instances) > MAX_INSTANCES:
            raise APIError(400, f"instances array exceeds maximum size of {MAX_INSTANCES}")
        found = await asyncio.gather(*(_one(request, i, aliases, posts) for i in instances))
        return json_response({"predictions": found})

    out = [Route(settings.predict_route, predict, methods=["POST"])]
    health = next((r for r in routes if r.path == "/health"), None)
    if settings.health_route and health is not None:
        out.append(Route(settings.health_route, health.endpoint, methods=["GET"]))
    return out


async def _one(request: Request, instance: Any, aliases: dict[str, str], posts: list[str]) -> Any:
    if not isinstance(instance, dict):
        return error_body(400, "each instance must be a JSON object")
    fmt = instance.get("@requestFormat")
    if not isinstance(fmt, str):
        return error_body(400, "each instance must include a string @requestFormat")
    path = aliases.get(fmt) or (fmt if fmt in posts else None)
    if path is None:
        return error_body(400, f"no handler registered for @requestFormat: {fmt}")
    body = {k: v for k, v in instance.items() if k != "@requestFormat"}
    if "stream" in body:
        body["stream"] = False  # one JSON answer per instance
    content = await _call(request, path, orjson.dumps(body))
    if not content:
        return None
    try:  # an error's envelope too, whatever its status, as llama-server
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return content.decode("utf-8", "replace")


async def _call(request: Request, path: str, body: bytes) -> bytes:
    """One POST through the whole app, as if a client had sent it with this request's
    headers (auth included); the response body."""
    scope = dict(request.scope)
    headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-length",)]
    headers.append((b"content-length", str(len(body)).encode()))
    scope.update(
        method="POST",
        path=path,
        raw_path=path.encode(),
        query_string=b"",
        headers=headers,
        # each inner request gets its own per-request state (Starlette keeps it in scope)
        state={},
    )
    for key in ("route", "endpoint", "path_params"):
        scope.pop(key, None)
    sent = False
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # no disconnect to report: wait to be cancelled
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await request.scope["app"](scope, receive, send)
    return b"".join(chunks)
