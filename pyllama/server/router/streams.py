"""Resumable streams through the router (llama-server's ``conv_model_tracker`` and
``router_stream_*``): each proxied POST that carries ``X-Conversation-Id`` records which
model serves the conversation, so ``GET``/``DELETE /v1/stream`` and ``POST
/v1/streams/lookup`` go straight to that model's child, where the session lives. A stop
(``DELETE``) while the model is still loading forgets the record, and the request waiting
for the load is then answered with an error instead of starting an orphan generation."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import defaultdict
from collections.abc import Awaitable, Callable

import httpx
from starlette.requests import Request
from starlette.responses import Response

from pyllama.server.http.errors import APIError
from pyllama.server.http.wire import json_response
from pyllama.server.router.entry import ModelEntry
from pyllama.server.router.forward import forward, table_of
from pyllama.server.streams.reply import CONV_HEADER
from pyllama.server.streams.routes import conv_id_param, requested_ids

__all__ = ["ROUTES", "ConvOwners", "stop_check"]

LOOKUP_TIMEOUT_S = 2.0  # llama-server's STREAM_LOOKUP_TIMEOUT_MS
MAX_TRACKED = 4096  # conversations remembered; the oldest are forgotten first


class ConvOwners:
    """conversation id -> (model name, ticket); the ticket tells a request whether a stop
    came (and forgot its conversation) while it waited for the model."""

    def __init__(self) -> None:
        self._owners: dict[str, tuple[str, int]] = {}
        self._tickets = itertools.count(1)

    def remember(self, conv_id: str, model: str) -> int:
        ticket = next(self._tickets)
        self._owners.pop(conv_id, None)
        self._owners[conv_id] = (model, ticket)
        while len(self._owners) > MAX_TRACKED:
            del self._owners[next(iter(self._owners))]
        return ticket

    def alive(self, conv_id: str, ticket: int) -> bool:
        owner = self._owners.get(conv_id)
        return owner is not None and owner[1] == ticket

    def model(self, conv_id: str) -> str | None:
        owner = self._owners.get(conv_id)
        return owner[0] if owner else None

    def forget(self, conv_id: str) -> None:
        self._owners.pop(conv_id, None)


def _owners(request: Request) -> ConvOwners:
    return request.app.state.conv_owners


def _tracked(request: Request, conv_id: str) -> ModelEntry | None:
    name = _owners(request).model(conv_id)
    return table_of(request).lookup(name) if name else None


def _owner(request: Request, conv_id: str) -> ModelEntry | None:
    """The child serving the conversation, when it is up."""
    entry = _tracked(request, conv_id)
    return entry if entry is not None and entry.status == "loaded" else None


def stop_check(request: Request, name: str) -> Callable[[], Awaitable[bool]] | None:
    """For a request with a conversation id: record that ``name`` serves it, and return
    what tells whether a stop has come for it since (None without an id)."""
    conv_id = request.headers.get(CONV_HEADER, "")
    if not conv_id:
        return None
    owners = _owners(request)
    ticket = owners.remember(conv_id, name)

    async def stopped() -> bool:
        return not owners.alive(conv_id, ticket)

    return stopped


async def stream_get(request: Request) -> Response:
    conv_id = conv_id_param(request)
    owner = _owner(request, conv_id)
    if owner is None:
        tracked = _tracked(request, conv_id)
        if tracked is not None and tracked.status in ("loading", "downloading", "downloaded"):
            raise APIError(503, "Stream owner model is loading, retry later")
        raise APIError(404, "Stream not found or expired")
    return await forward(request, owner, b"")


async def stream_delete(request: Request) -> Response:
    conv_id = conv_id_param(request)
    owner = _owner(request, conv_id)
    if owner is not None:
        url = f"http://127.0.0.1:{owner.port}/v1/stream"
        with contextlib.suppress(httpx.HTTPError):  # a child gone has nothing left to stop
            await table_of(request).client.delete(
                url, params={"conv_id": conv_id}, timeout=LOOKUP_TIMEOUT_S
            )
    _owners(request).forget(conv_id)  # a request waiting for the load ends with an error
    return Response(status_code=204)


async def streams_lookup(request: Request) -> Response:
    """Each id asked for goes to the child that owns it; children not named are not asked."""
    per_child: dict[int, list[str]] = defaultdict(list)
    for conv_id in await requested_ids(request):
        owner = _owner(request, conv_id)
        if owner is not None:
            per_child[owner.port].append(conv_id)
    client = table_of(request).client

    async def ask(port: int, ids: list[str]) -> list[object]:
        try:
            r = await client.post(
                f"http://127.0.0.1:{port}/v1/streams/lookup",
                json={"conversation_ids": ids},
                timeout=LOOKUP_TIMEOUT_S,
            )
            found = r.json() if r.status_code == 200 else []
        except (httpx.HTTPError, ValueError):
            return []
        return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []

    answers = await asyncio.gather(*(ask(p, ids) for p, ids in per_child.items()))
    return json_response([e for found in answers for e in found])


ROUTES = [
    ("/v1/stream", stream_get, ["GET"]),
    ("/v1/stream", stream_delete, ["DELETE"]),
    ("/v1/streams/lookup", streams_lookup, ["POST"]),
]
