"""A response's head leaves with its first body write (pyllama/server/http/header_case.py):
one send for a small JSON answer instead of two, so a client is woken once. Checked on the
transport wrapper uvicorn's protocol writes through, with a transport that records what
reaches it."""

from __future__ import annotations

import asyncio

from pyllama.server.http.header_case import _Transport

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"
TITLED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"


class Recording(asyncio.WriteTransport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.writes.append(bytes(data))

    def write_eof(self) -> None:
        self.writes.append(b"<eof>")

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_head_and_body_leave_in_one_write() -> None:
    async def main() -> list[bytes]:
        raw = Recording()
        t = _Transport(raw)
        t.write(HEAD)
        assert raw.writes == []  # held until the body or the end of this turn
        t.write(b"{}")
        await asyncio.sleep(0)
        return raw.writes

    assert asyncio.run(main()) == [TITLED + b"{}"]


def test_a_head_alone_leaves_at_the_end_of_the_turn() -> None:
    """A stream's head (or a HEAD answer) is not held for a body that comes later."""

    async def main() -> list[bytes]:
        raw = Recording()
        t = _Transport(raw)
        t.write(HEAD)
        await asyncio.sleep(0)
        first = list(raw.writes)
        t.write(b"data: 1\n\n")
        return [*first, b"|", *raw.writes[len(first) :]]

    assert asyncio.run(main()) == [TITLED, b"|", b"data: 1\n\n"]


def test_close_sends_a_held_head_first() -> None:
    async def main() -> Recording:
        raw = Recording()
        t = _Transport(raw)
        t.write(HEAD)
        t.close()
        await asyncio.sleep(0)  # the turn's flush finds nothing left to send
        return raw

    raw = asyncio.run(main())
    assert raw.writes == [TITLED] and raw.closed


def test_write_eof_sends_a_held_head_first() -> None:
    async def main() -> list[bytes]:
        raw = Recording()
        t = _Transport(raw)
        t.write(HEAD)
        t.write_eof()
        await asyncio.sleep(0)
        return raw.writes

    assert asyncio.run(main()) == [TITLED, b"<eof>"]
