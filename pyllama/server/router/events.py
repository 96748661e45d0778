"""The router's ``/models/sse`` fan-out: each subscriber has its own queue of encoded
``data: {"model", "event", "data"}`` lines, with llama-server's event names
(``model_status``, ``status_change``, ``download_progress``, ``download_finished``,
``download_failed``, ``model_remove``, ``models_reload``).

Event-loop only: ``publish`` never blocks and must be called on the router's loop (a
download's thread hands its progress over with ``loop.call_soon_threadsafe``). A
subscriber that stops reading is dropped once SSE_BACKLOG events wait for it; ``None`` in
a queue tells its reader to end.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

__all__ = ["SSE_BACKLOG", "Events"]

SSE_BACKLOG = 4096  # events a subscriber may leave unread before it is dropped


class Events:
    """``/models/sse`` subscribers, each with its own queue of encoded events."""

    def __init__(self) -> None:
        self._subs: set[asyncio.Queue[bytes | None]] = set()

    def subscribe(self) -> asyncio.Queue[bytes | None]:
        q: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._subs.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[bytes | None]) -> None:
        self._subs.discard(q)

    def publish(self, event: str, model: str, data: Any = None) -> None:
        body: dict[str, Any] = {"model": model, "event": event}
        if data is not None:
            body["data"] = data
        line = b"data: " + orjson.dumps(body) + b"\n\n"
        for q in list(self._subs):
            if q.qsize() >= SSE_BACKLOG:  # a reader that stopped reading: let it go
                self._subs.discard(q)
                q.put_nowait(None)
            else:
                q.put_nowait(line)

    def close(self) -> None:
        for q in self._subs:
            q.put_nowait(None)
        self._subs.clear()
