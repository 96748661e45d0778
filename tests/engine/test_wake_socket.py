"""The engine's wake-up socket (csrc/engine/wake_socket.*, pyllama/engine.py): the same
events on a loop that watches the socket (add_reader: selector loops, uvloop) and on one
that can only await reads on it (sock_recv: Windows' Proactor loop, which has no
add_reader; wine runs the real one in tests/windows/), across loops, and none after the
engine lets go of it."""

from __future__ import annotations

import asyncio
import socket

import pytest

from pyllama import _core
from pyllama.engine import AsyncEngine, generate, make_task, open_engine
from pyllama.sampling import make_sampling_params

PROMPTS = ["The capital of France is", "Once upon a time", "def fibonacci(n):"]


class NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop with the Proactor's shape: it reads sockets, but offers no readiness
    callbacks (add_reader raises NotImplementedError, as ProactorEventLoop's does)."""

    def add_reader(self, fd, callback, *args):  # type: ignore[override]
        raise NotImplementedError


@pytest.fixture(scope="module")
def model(smollm_path: str) -> _core.Model:
    return _core.Model(smollm_path)


def task(model: _core.Model, prompt: str) -> _core.TaskParams:
    return make_task(
        model.tokenize(prompt, True, True),
        n_predict=16,
        sampling=make_sampling_params(temperature=0),
        cache_prompt=False,
    )


def tokens(events) -> list[int]:
    return [e.token for e in events if e.type == "token" and e.token >= 0]


async def streamed(ae: AsyncEngine, model: _core.Model) -> list[list[int]]:
    """Every prompt at once, each read event by event."""

    async def one(prompt: str) -> list[int]:
        out = []
        async with ae.submit(task(model, prompt)) as stream:
            async for ev in stream:
                if ev.type == "token":
                    out.append(ev.token)
        return out

    return list(await asyncio.gather(*(one(p) for p in PROMPTS)))


@pytest.fixture(scope="module")
def alone(model: _core.Model) -> list[list[int]]:
    eng = open_engine(model, n_parallel=3, n_ctx=3 * 512, n_threads=2)
    try:
        return [tokens(generate(eng, task(model, p))) for p in PROMPTS]
    finally:
        eng.stop()


def test_selector_loop_watches_the_socket(model: _core.Model, alone: list[list[int]]) -> None:
    # a selector loop (Linux's default; on Windows the non-default one, whose select()
    # takes sockets: the reason the wake-up is one)
    ae = AsyncEngine(open_engine(model, n_parallel=3, n_ctx=3 * 512, n_threads=2))
    loop = asyncio.SelectorEventLoop()
    try:

        async def main() -> list[list[int]]:
            out = await streamed(ae, model)
            assert ae._waker is None  # add_reader served
            return out

        assert loop.run_until_complete(main()) == alone
    finally:
        ae.close()
        loop.close()


def test_loop_without_add_reader_awaits_the_socket(
    model: _core.Model, alone: list[list[int]]
) -> None:
    ae = AsyncEngine(open_engine(model, n_parallel=3, n_ctx=3 * 512, n_threads=2))
    loop = NoReaderLoop()
    try:

        async def main() -> list[list[int]]:
            out = await streamed(ae, model)
            assert ae._waker is not None and not ae._waker.done()  # the sock_recv task served
            return out

        assert loop.run_until_complete(main()) == alone
        ae.close()
        loop.run_until_complete(asyncio.sleep(0))  # the cancelled reader task ends
    finally:
        ae.close()
        loop.close()


def test_one_engine_serves_loop_after_loop(model: _core.Model, alone: list[list[int]]) -> None:
    # a new loop gets a new socket; the old one is let go (asyncio.run closes its loop)
    ae = AsyncEngine(open_engine(model, n_parallel=3, n_ctx=3 * 512, n_threads=2))
    try:
        for _ in range(2):
            assert asyncio.run(streamed(ae, model)) == alone
        loop = NoReaderLoop()
        try:
            assert loop.run_until_complete(streamed(ae, model)) == alone
        finally:  # shut down as asyncio.run does: its tasks (the reader) cancelled and run out
            tasks = asyncio.all_tasks(loop)
            for t in tasks:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()
        assert asyncio.run(streamed(ae, model)) == alone
    finally:
        ae.close()


def test_no_byte_after_the_engine_lets_go(model: _core.Model) -> None:
    eng = open_engine(model, n_parallel=1, n_ctx=512, n_threads=2)
    rsock, wsock = socket.socketpair()
    try:
        rsock.setblocking(False)
        eng.set_notify_socket(wsock.fileno())
        wsock.close()  # the engine rings its own duplicate
        ev = list(generate(eng, task(model, PROMPTS[0])))
        assert ev[-1].done
        assert rsock.recv(16) == b"\x01"  # one byte for the whole task: never more
        with pytest.raises(BlockingIOError):
            rsock.recv(16)
        eng.take_ready()
        eng.set_notify_socket(-1)
        list(generate(eng, task(model, PROMPTS[1])))
        # the engine closed its duplicate, the last copy of the write end: end of file,
        # after at most the one ring that may have come between take_ready and letting go
        rsock.settimeout(10)
        rest = rsock.recv(16)
        assert rest in (b"", b"\x01")
        if rest:
            assert rsock.recv(16) == b""
    finally:
        rsock.close()
        eng.stop()
