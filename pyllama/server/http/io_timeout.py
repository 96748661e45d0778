"""``-to/--timeout``: llama-server's read and write timeouts on a connection (cpp-httplib's
``set_read_timeout``/``set_write_timeout``), on uvicorn's HTTP protocol.

Read: while a request is incomplete (its head or body still arriving), a client that sends
nothing for N seconds has its connection closed; a complete request being answered has no
read timer (a long generation is not a stall). Write: a client that reads nothing while the
server's writes are paused by flow control (its socket buffer full) for N seconds has its
connection closed. Between requests uvicorn's keep-alive timeout applies, as httplib's.
Everything here runs on the event loop thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["with_io_timeout"]


def with_io_timeout(base: type, seconds: float) -> type:
    """``base`` (a uvicorn HTTP protocol class) closing connections that stall ``seconds``."""

    class IoTimeoutProtocol(base):  # type: ignore[misc, valid-type]
        _read_timer: asyncio.TimerHandle | None = None
        _write_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._rearm_read()  # the first request's bytes are awaited

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._rearm_read()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._write_timer is None:
                self._write_timer = self.loop.call_later(seconds, self._stalled)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel("_write_timer")

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel("_read_timer")
            self._cancel("_write_timer")
            super().connection_lost(exc)

        def _rearm_read(self) -> None:
            self._cancel("_read_timer")
            cycle = getattr(self, "cycle", None)
            # no request yet, a new one arriving after the last answer, or a body still
            # due: the client owes bytes. A complete request being answered owes none.
            if cycle is None or cycle.response_complete or cycle.more_body:
                self._read_timer = self.loop.call_later(seconds, self._stalled)

        def _cancel(self, name: str) -> None:
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

        def _stalled(self) -> None:
            self._read_timer = self._write_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return IoTimeoutProtocol
