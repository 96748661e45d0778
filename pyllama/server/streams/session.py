"""One resumable stream: the SSE bytes of a generation, kept in a buffer capped in size
(the oldest bytes go first) that any number of readers drain from their own offset.

Everything here runs on the server's event loop (uvicorn serves on one), so no locks: a
writer wakes the readers by setting the current ``asyncio.Event`` and starting a new one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

__all__ = ["OffsetLost", "StreamSession"]


class OffsetLost(Exception):
    """The offset asked for fell out of the buffer (it holds only the newest bytes)."""


class StreamSession:
    def __init__(self, conversation_id: str, max_bytes: int) -> None:
        self.conversation_id = conversation_id
        self.started_at = int(time.time())
        self.completed_at = 0  # unix seconds once finalized
        self.cancelled = False
        self.producer: asyncio.Task[None] | None = None  # the generation writing into it
        self._buf = bytearray()
        self._dropped = 0  # bytes evicted from the front to keep under the cap
        self._cap = max_bytes
        self._done = False
        self._wake = asyncio.Event()

    @property
    def done(self) -> bool:
        return self._done

    @property
    def total_bytes(self) -> int:
        """Every byte that ever entered the session."""
        return self._dropped + len(self._buf)

    @property
    def dropped(self) -> int:
        return self._dropped

    def describe(self) -> dict[str, object]:
        """The session as ``/v1/streams/lookup`` lists it."""
        return {
            "conversation_id": self.conversation_id,
            "is_done": self._done,
            "total_bytes": self.total_bytes,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
        }

    def append(self, data: bytes) -> bool:
        if self._done:
            return False
        if not data:
            return True
        if len(data) >= self._cap:  # one chunk over the cap: keep its tail
            self._dropped += len(self._buf) + len(data) - self._cap
            self._buf = bytearray(data[len(data) - self._cap :])
        else:
            over = len(self._buf) + len(data) - self._cap
            if over > 0:
                del self._buf[:over]
                self._dropped += over
            self._buf += data
        self._notify()
        return True

    def finalize(self) -> None:
        if self._done:
            return
        self._done = True
        self.completed_at = int(time.time())
        self._notify()

    def cancel(self) -> None:
        """Stop the generation (its task streams close, which frees the engine slot) and
        wake every reader; what was written stays readable until the session is dropped."""
        self.cancelled = True
        if self.producer is not None and not self.producer.done():
            self.producer.cancel()
        self.finalize()

    async def read_from(self, offset: int) -> AsyncIterator[bytes]:
        """The bytes from ``offset`` on, then each new chunk as it comes, until the session
        is finalized. Raises OffsetLost if the cap has dropped bytes the reader still needs."""
        while True:
            if offset < self._dropped:
                raise OffsetLost(offset)
            end = self.total_bytes
            if offset < end:
                chunk = bytes(self._buf[offset - self._dropped :])
                offset = end
                yield chunk
                continue
            if self._done:
                return
            await self._wake.wait()

    def _notify(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()
