"""Response header names on the wire as ``Title-Case`` (``Access-Control-Allow-Origin``),
as llama-server sends them, instead of uvicorn's lower case.

HTTP names are case-insensitive, but clients that copy headers into a plain dict look them
up verbatim (llama.cpp's own server tests do: ``res.headers["Access-Control-Allow-Origin"]``).
uvicorn lowercases every name while it writes the head, so the rewrite happens on the
transport: a write that starts with a status line has its header names re-cased up to the
blank line. Body writes (every streamed token) pay one prefix comparison.

The same transport sends a response's head together with its first body write: uvicorn
writes them separately, one after the other in the same event-loop turn, so a small JSON
answer cost two sends and woke its client twice. The head waits at most until the end of
that turn (a HEAD answer or a stream's head goes out then), and before any close.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["title_case_protocol"]


def _title(name: bytes) -> bytes:
    return b"-".join(part[:1].upper() + part[1:] for part in name.split(b"-"))


def recase_head(data: bytes) -> bytes:
    """``data`` with the header names of its leading HTTP head title-cased."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return data
    lines = data[:end].split(b"\r\n")
    for i in range(1, len(lines)):
        name, sep, rest = lines[i].partition(b":")
        lines[i] = _title(name) + sep + rest
    return b"\r\n".join(lines) + data[end:]


class _Transport:
    """The connection's transport with ``write`` re-casing response heads and holding each
    head for the body write that follows it in the same loop turn. Event-loop thread only."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._head: bytes | None = None

    def write(self, data: bytes) -> None:
        if data[:9] == b"HTTP/1.1 ":
            data = recase_head(data)
            if self._head is None:
                self._head = data
                asyncio.get_running_loop().call_soon(self._flush)
                return
        if self._head is not None:
            data, self._head = self._head + data, None
        self._transport.write(data)

    def _flush(self) -> None:
        if self._head is not None:
            data, self._head = self._head, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def title_case_protocol() -> type:
    """uvicorn's HTTP protocol (httptools when installed, else h11) writing Title-Case
    header names; for ``uvicorn.Config(http=...)``."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # httptools missing
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base

    class TitleCaseProtocol(Base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(_Transport(transport))

    return TitleCaseProtocol
