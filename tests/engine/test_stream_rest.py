"""TaskStream.rest(): a whole answer read with one wake-up of its reader (pyllama/engine.py),
the same events as reading it event by event, whatever was read before, and nothing lost
or doubled when the wait is cancelled."""

from __future__ import annotations

import asyncio

import pytest

from pyllama import _core
from pyllama.engine import AsyncEngine, TaskStream, make_task, open_engine
from pyllama.sampling import make_sampling_params

PROMPT = "Once upon a time"
N_PREDICT = 24


class CountingQueue(asyncio.Queue):
    """Counts the items a reader takes: one per wake-up of a reader that waits on it."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = 0

    async def get(self):  # type: ignore[override]
        item = await super().get()
        self.taken += 1
        return item


@pytest.fixture(scope="module")
def model(smollm_path: str) -> _core.Model:
    return _core.Model(smollm_path)


@pytest.fixture()
def ae(model: _core.Model):
    engine = AsyncEngine(open_engine(model, n_parallel=2, n_ctx=1024, n_threads=2))
    yield engine
    engine.close()


def task(model: _core.Model, n_predict: int = N_PREDICT) -> _core.TaskParams:
    return make_task(
        model.tokenize(PROMPT, True, True),
        n_predict=n_predict,
        sampling=make_sampling_params(temperature=0),
        cache_prompt=False,
    )


def tokens(events: list[_core.Event]) -> list[int]:
    return [e.token for e in events if e.type == "token"]


def counted(stream: TaskStream) -> CountingQueue:
    assert stream._queue.empty()  # nothing drained yet: the loop has not run since submit
    stream._queue = CountingQueue()
    return stream._queue


def test_rest_reads_the_whole_answer_with_one_wake_up(model: _core.Model, ae: AsyncEngine) -> None:
    async def main() -> tuple[list[_core.Event], list[_core.Event], int, int]:
        async with ae.submit(task(model)) as stream:
            q_iter = counted(stream)
            iterated = [ev async for ev in stream]
        async with ae.submit(task(model)) as stream:
            q_rest = counted(stream)
            rest = await stream.rest()
            assert await stream.rest() == []  # ended: nothing more
        return iterated, rest, q_iter.taken, q_rest.taken

    iterated, rest, woken_iterating, woken_rest = asyncio.run(main())
    assert len(tokens(iterated)) == N_PREDICT
    assert tokens(rest) == tokens(iterated)
    assert rest[-1].done and rest[-1].type == iterated[-1].type == "final"
    assert rest[-1].n_predicted == N_PREDICT
    assert woken_rest == 1
    assert woken_iterating > 1  # a decode step a wake-up, some drains holding several


def test_rest_after_some_events_gives_the_remainder(model: _core.Model, ae: AsyncEngine) -> None:
    async def main() -> tuple[list[_core.Event], list[_core.Event], list[_core.Event]]:
        async with ae.submit(task(model)) as stream:
            whole = [ev async for ev in stream]
        async with ae.submit(task(model)) as stream:
            first = [await stream.__anext__() for _ in range(5)]
            rest = await stream.rest()
        return whole, first, rest

    whole, first, rest = asyncio.run(main())
    assert tokens(first + rest) == tokens(whole)
    assert rest[-1].done


def test_a_cancelled_rest_loses_nothing(model: _core.Model, ae: AsyncEngine) -> None:
    async def main() -> tuple[list[_core.Event], list[_core.Event]]:
        async with ae.submit(task(model)) as stream:
            whole = [ev async for ev in stream]
        async with ae.submit(task(model, n_predict=200)) as stream:
            reader = asyncio.ensure_future(stream.rest())
            # a few steps in: some events held for the reader, the task still running
            deadline = asyncio.get_running_loop().time() + 120
            while stream._hold is None or len(tokens(stream._hold)) < 8:
                assert asyncio.get_running_loop().time() < deadline, "no 8 tokens in 120 s"
                await asyncio.sleep(0.01)
            reader.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reader
            assert stream._hold is None
            after = [ev async for ev in stream]
        return whole, after

    whole, after = asyncio.run(main())
    assert len(tokens(after)) == 200
    assert tokens(after)[:N_PREDICT] == tokens(whole)  # from the first token, none doubled
    assert after[-1].done
