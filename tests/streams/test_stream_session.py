"""The resumable stream buffer and registry on their own (no server): bytes kept under the
cap, readers from any offset, an offset the cap dropped, waking on new bytes and at the end,
one session per conversation, expiry after the end, the bound on how many are kept."""

from __future__ import annotations

import asyncio

import pytest

from pyllama.server.streams import OffsetLost, StreamSession, StreamSessions


async def _drain(session: StreamSession, offset: int = 0) -> bytes:
    return b"".join([c async for c in session.read_from(offset)])


def test_readers_get_every_byte_from_their_offset() -> None:
    async def main() -> None:
        s = StreamSession("c", max_bytes=1024)
        reader = asyncio.ensure_future(_drain(s))
        late = asyncio.ensure_future(_drain(s, 3))
        for piece in (b"abc", b"def", b"gh"):
            s.append(piece)
            await asyncio.sleep(0)
        assert not reader.done()  # still waiting: the session is live
        s.finalize()
        assert await reader == b"abcdefgh" and await late == b"defgh"
        assert await _drain(s, 8) == b"" and s.total_bytes == 8
        assert not s.append(b"x")  # finalized: nothing more goes in

    asyncio.run(main())


def test_the_cap_drops_the_oldest_bytes() -> None:
    async def main() -> None:
        s = StreamSession("c", max_bytes=4)
        s.append(b"abc")
        s.append(b"def")
        assert (s.dropped, s.total_bytes) == (2, 6)
        s.append(b"0123456789")  # one chunk over the cap keeps its tail
        assert (s.dropped, s.total_bytes) == (12, 16)
        s.finalize()
        assert await _drain(s, 12) == b"6789" and await _drain(s, 14) == b"89"
        with pytest.raises(OffsetLost):
            await _drain(s, 11)

    asyncio.run(main())


def test_cancel_stops_the_producer_and_wakes_readers() -> None:
    async def main() -> None:
        s = StreamSession("c", max_bytes=64)
        started = asyncio.Event()

        async def produce() -> None:
            s.append(b"x")
            started.set()
            await asyncio.sleep(3600)

        s.producer = asyncio.ensure_future(produce())
        reader = asyncio.ensure_future(_drain(s))
        await started.wait()
        s.cancel()
        assert await asyncio.wait_for(reader, 5) == b"x"
        await asyncio.sleep(0)
        assert s.producer.cancelled() and s.done and s.cancelled and s.completed_at > 0

    asyncio.run(main())


def test_one_session_per_conversation_and_lookup_by_asked_ids() -> None:
    async def main() -> None:
        reg = StreamSessions()
        first = reg.create_or_replace("conv")
        second = reg.create_or_replace("conv")  # a new generation of the conversation
        assert first.cancelled and first.done and reg.get("conv") is second
        reg.create_or_replace("conv::model-b")
        reg.create_or_replace("other")
        found = {s.conversation_id for s in reg.lookup(["conv"])}
        assert found == {"conv", "conv::model-b"}
        assert reg.lookup(["con"]) == [] and reg.lookup([]) == []
        assert reg.evict_and_cancel("other") and not reg.evict_and_cancel("other")
        assert reg.get("other") is None

    asyncio.run(main())


def test_a_finished_session_expires_after_the_ttl() -> None:
    async def main() -> None:
        reg = StreamSessions(ttl_s=0.05)
        s = reg.create_or_replace("c")

        async def produce() -> None:
            s.append(b"data")

        reg.produced_by(s, asyncio.ensure_future(produce()))
        await asyncio.sleep(0.01)
        assert s.done and reg.get("c") is s  # readable for a while after its end
        await asyncio.sleep(0.2)
        assert reg.get("c") is None

    asyncio.run(main())


def test_the_number_of_sessions_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        monkeypatch.setattr(StreamSessions, "MAX_SESSIONS", 3)
        reg = StreamSessions()
        live = reg.create_or_replace("live")
        done = reg.create_or_replace("done")
        done.finalize()
        reg.create_or_replace("c3")
        reg.create_or_replace("c4")  # over the bound: the finished one goes first
        assert reg.get("done") is None and reg.get("live") is live and len(reg) == 3
        reg.create_or_replace("c5")  # then the oldest running one is stopped
        assert reg.get("live") is None and live.cancelled and len(reg) == 3

    asyncio.run(main())
