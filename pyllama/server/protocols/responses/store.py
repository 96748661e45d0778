"""Stored OpenAI Responses (``store: true``), for GET/DELETE /v1/responses/{id} and
``previous_response_id``: a bounded in-memory LRU, one per app, lost at restart."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pyllama.server.http.errors import APIError

__all__ = ["MAX_STORED_RESPONSES", "ResponseStore", "StoredResponse"]

MAX_STORED_RESPONSES = 1024  # past this, the least recently used response is forgotten


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]  # the response object as returned
    input: list[dict[str, Any]]  # this request's own input items (instructions excluded)

    @property
    def previous_id(self) -> str | None:
        return self.response.get("previous_response_id")


class ResponseStore:
    def __init__(self, capacity: int = MAX_STORED_RESPONSES) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, stored: StoredResponse) -> None:
        rid = stored.response["id"]
        self._items[rid] = stored
        self._items.move_to_end(rid)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def get(self, rid: str) -> StoredResponse | None:
        stored = self._items.get(rid)
        if stored is not None:
            self._items.move_to_end(rid)
        return stored

    def delete(self, rid: str) -> bool:
        return self._items.pop(rid, None) is not None

    def conversation(self, rid: str) -> list[dict[str, Any]]:
        """Input and output items of ``rid`` and of every response before it, oldest first;
        404 if it or one of its ancestors is not stored (any more)."""
        chain: list[StoredResponse] = []
        current: str | None = rid
        while current is not None:
            stored = self.get(current)  # touching ancestors keeps a used chain alive
            if stored is None:
                if current == rid:
                    raise APIError(404, f"Previous response with id '{rid}' not found.")
                raise APIError(
                    404,
                    f"Response '{current}', an earlier turn of '{rid}', is no longer stored.",
                )
            chain.append(stored)
            current = stored.previous_id
        items: list[dict[str, Any]] = []
        for stored in reversed(chain):
            items += stored.input
            items += stored.response["output"]
        return items
